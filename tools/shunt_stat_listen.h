/* shunt stat -l: the listening sockets of the listener registry. */
#ifndef SHUNT_STAT_LISTEN_H
#define SHUNT_STAT_LISTEN_H

/* Print the listeners registered in <rundir>/l/ (address and port, scope,
 * owner, live or stale, the processes holding them), only those held by
 * pid (0: any) or by a program matching the glob name (NULL: any); as one
 * JSON object when json.  The number printed, or -1 (message printed). */
int stat_listeners(const char *rundir, long pid, const char *name, int json);

#endif
