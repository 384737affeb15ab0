/* Shared by the files of config/ only. */
#ifndef SHUNT_CONFIG_INT_H
#define SHUNT_CONFIG_INT_H

#include <stddef.h>

#define QUOTE_MAX 64 /* longest input echoed in a message */

/* s[0..n) made fit to quote in an error message. */
void shunt_config_quote(char *out, size_t outsz, const char *s, size_t n);

#endif
