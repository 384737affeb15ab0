/* Credentials: setuid and its family.
 *
 * Servers drop privileges after listen() (nginx's workers become nobody,
 * memcached -u, postgres): the process that accepts is then no longer one
 * that can open the offers clients leave in the rundir of the user who
 * registered the listener.  Around each of these calls, shunt opens its
 * registry entries while it still may, and marks them if the call took the
 * rundir out of reach, so clients go to TCP at once (server-cred) instead
 * of waiting out an offer nobody will take. */
#include <errno.h>
#include <grp.h>
#include <unistd.h>

#include "core/shunt_core.h"
#include "core/shunt_listen.h"
#include "core/shunt_real.h"

#define AROUND_SETID(call)                                                      \
	do {                                                                    \
		shunt_listen_before_setid();                                    \
		int r_ = (call);                                                \
		int e_ = errno;                                                 \
		shunt_euid_forget();                                            \
		shunt_listen_after_setid(r_ == 0);                              \
		errno = e_;                                                     \
		return r_;                                                      \
	} while (0)

SHUNT_EXPORT int setuid(uid_t u)
{
	AROUND_SETID(REAL(setuid)(u));
}

SHUNT_EXPORT int seteuid(uid_t u)
{
	AROUND_SETID(REAL(seteuid)(u));
}

SHUNT_EXPORT int setreuid(uid_t r, uid_t e)
{
	AROUND_SETID(REAL(setreuid)(r, e));
}

SHUNT_EXPORT int setresuid(uid_t r, uid_t e, uid_t s)
{
	AROUND_SETID(REAL(setresuid)(r, e, s));
}

SHUNT_EXPORT int setgid(gid_t g)
{
	AROUND_SETID(REAL(setgid)(g));
}

SHUNT_EXPORT int setegid(gid_t g)
{
	AROUND_SETID(REAL(setegid)(g));
}

SHUNT_EXPORT int setregid(gid_t r, gid_t e)
{
	AROUND_SETID(REAL(setregid)(r, e));
}

SHUNT_EXPORT int setresgid(gid_t r, gid_t e, gid_t s)
{
	AROUND_SETID(REAL(setresgid)(r, e, s));
}

SHUNT_EXPORT int setgroups(size_t n, const gid_t *g)
{
	AROUND_SETID(REAL(setgroups)(n, g));
}

SHUNT_EXPORT int initgroups(const char *user, gid_t g)
{
	AROUND_SETID(REAL(initgroups)(user, g));
}
