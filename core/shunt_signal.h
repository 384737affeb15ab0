/* Which signal handlers ran while a call waited, so an interrupted wait ends
 * as the kernel's socket call would: restarted after a handler with
 * SA_RESTART, EINTR after one without.  The handlers the application
 * installs through libc (preload/shunt_signal.c) run behind a trampoline
 * that reports here, per thread. */
#ifndef SHUNT_SIGNAL_H
#define SHUNT_SIGNAL_H

/* The trampoline: a handler installed with (restart) SA_RESTART is about
 * to run in this thread.  Async-signal-safe. */
void shunt_sig_ran(int restart);

/* fn(arg) runs in this thread's next caught signal, before the
 * application's handler (which may not return to the interrupted call):
 * what the call must undo then (a posted buffer).  Once; fn NULL clears. */
void shunt_sig_guard(void (*fn)(void *), void *arg);

/* A mark of this thread's handler runs, taken before a wait. */
unsigned shunt_sig_mark(void);

/* After a wait ended in EINTR: 1 when every handler that ran since mark had
 * SA_RESTART (restart the call), 0 when one did not (EINTR), -1 when no
 * handler seen by the trampoline ran (one installed past libc: ask
 * shunt_sig_all_restart). */
int shunt_sig_restart_since(unsigned mark);

/* 1 when every caught signal's handler has SA_RESTART (the rule when the
 * handler that ran is not known). */
int shunt_sig_all_restart(void);

#endif
