/* Strings in machine-readable output, written the same way by every
 * subcommand (shunt stat --json, shunt bench --csv, shunt ab --json/--csv). */
#ifndef SHUNT_OUTFMT_H
#define SHUNT_OUTFMT_H

#include <stdio.h>

/* s as a JSON string, quotes included; bytes outside printable ASCII as
 * \u00XX (program names and command lines are bytes, not UTF-8). */
void json_str(FILE *f, const char *s);

/* s as one CSV field (RFC 4180: quoted when it holds a comma, a quote or a
 * line break). */
void csv_field(FILE *f, const char *s);

#endif
