/* How an end holds its slot of ring memory (shm/shm_arena.c): by its
 * process's tag in the header and a let-go bit, with no lock of its own.
 * The owner must never hand out a slot an end still holds (a live server,
 * a forked child's end), must hand it out again once nobody does (both let
 * go, the server killed), and a server that read an offer before the slot
 * was handed out again must not be able to claim the new connection's.
 * "Another process" is a forked child, told what to do over a pipe. */
#include <criterion/criterion.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/shunt_core.h"
#include "core/shunt_transport.h"
#include "shm/shm_internal.h"

const struct shunt_transport_ops *const shunt_transports[] = {&shunt_transport_shm, NULL};

#define RING 65536u

static void alloc(struct shm_slot *s, char *target)
{
	cr_assert_eq(shm_arena_alloc(RING, s, target, 96), 0, "no slot");
}

/* A server end in this process on the slot target names, claimed. */
static void attach_claim(const char *target, struct shm_slot *s)
{
	enum shunt_reason why;
	cr_assert_eq(shm_arena_attach(target, -1, s, &why), 0, "attach: reason %d", (int)why);
	uint64_t use = __atomic_load_n(&s->hdr->use, __ATOMIC_ACQUIRE);
	cr_assert(shm_arena_claim(s, use), "claim");
}

/* The header of the next slot handed out. */
static struct shm_hdr *next_hdr(struct shm_slot *s, char *target)
{
	alloc(s, target);
	return s->hdr;
}

Test(shm_arena, a_slot_is_held_by_each_end_until_it_lets_go)
{
	struct shm_slot c, sv;
	char target[96];
	alloc(&c, target);
	cr_assert(shm_arena_side_held(&c, SHM_CLIENT));
	cr_assert_not(shm_arena_side_held(&c, SHM_SERVER), "nobody claimed the server side");
	attach_claim(target, &sv);
	cr_assert_eq(sv.hdr, c.hdr);
	cr_assert(shm_arena_side_held(&c, SHM_SERVER));
	cr_assert(shm_arena_side_held(&sv, SHM_CLIENT));
	/* A second claim (another server, a stale one) fails. */
	cr_assert_not(shm_arena_claim(&sv, __atomic_load_n(&sv.hdr->use, __ATOMIC_ACQUIRE)));
	struct shm_hdr *h = c.hdr;
	shm_arena_release(&sv);
	cr_assert(__atomic_load_n(&h->let_go, __ATOMIC_ACQUIRE) & (1u << SHM_SERVER));
	shm_arena_release(&c);
	cr_assert_eq(__atomic_load_n(&h->let_go, __ATOMIC_ACQUIRE), 3u);
}

/* The first arena has 4 slots: with the other three busy, the next
 * allocation must be the one slot let go of, or a new arena's. */
Test(shm_arena, the_owner_reuses_a_slot_only_when_both_ends_let_go)
{
	struct shm_slot s[4], sv, again;
	char t[4][96], ta[96];
	for (int i = 0; i < 4; i++)
		alloc(&s[i], t[i]);
	struct shm_hdr *h0 = s[0].hdr;
	attach_claim(t[0], &sv);
	shm_arena_release(&s[0]); /* the client lets go, the server holds on */
	cr_assert_neq(next_hdr(&again, ta), h0, "handed out under a live server end");
	shm_arena_release(&again);
	shm_arena_release(&sv);
	struct shm_hdr *h = next_hdr(&again, ta);
	/* The cursor may pick the other freed slot first; then h0 is next. */
	if (h != h0) {
		struct shm_slot more;
		char tm[96];
		cr_assert_eq(next_hdr(&more, tm), h0, "a slot both ends let go of is not reused");
		shm_arena_release(&more);
	}
	shm_arena_release(&again);
	for (int i = 1; i < 4; i++)
		shm_arena_release(&s[i]);
}

Test(shm_arena, a_stale_claim_cannot_take_the_next_connection)
{
	struct shm_slot s[4], sv;
	char t[4][96];
	for (int i = 0; i < 4; i++)
		alloc(&s[i], t[i]);
	enum shunt_reason why;
	/* A server that found the offer of slot 0, read its use... */
	cr_assert_eq(shm_arena_attach(t[0], -1, &sv, &why), 0);
	uint64_t stale = __atomic_load_n(&sv.hdr->use, __ATOMIC_ACQUIRE);
	/* ...while the client gave up and the owner handed it out again. */
	shm_arena_release(&s[0]);
	struct shm_slot n;
	char tn[96];
	alloc(&n, tn);
	cr_assert_eq(n.hdr, sv.hdr, "the only free slot was not reused");
	cr_assert_not(shm_arena_claim(&sv, stale), "a stale offer claimed a new connection");
	cr_assert_not(shm_arena_side_held(&n, SHM_SERVER));
	/* Releasing the unclaimed end lets nothing go on the new one. */
	shm_arena_release(&sv);
	cr_assert_eq(__atomic_load_n(&n.hdr->let_go, __ATOMIC_ACQUIRE), 0u);
	shm_arena_release(&n);
	for (int i = 1; i < 4; i++)
		shm_arena_release(&s[i]);
}

/* A server end in another process holds the slot while it lives, and not
 * after it is killed (it never let go: its tag's lock died with it). */
Test(shm_arena, a_killed_server_holds_nothing)
{
	struct shm_slot c;
	char target[96];
	alloc(&c, target);
	int up[2], hold[2];
	cr_assert_eq(pipe(up), 0);
	cr_assert_eq(pipe(hold), 0);
	shunt_before_fork();
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		/* Only the parent's ends of the pipes stay open there: if it
		 * fails, this child reads EOF instead of waiting for ever. */
		close(up[0]);
		close(hold[1]);
		shunt_after_fork_child();
		struct shm_slot sv;
		enum shunt_reason why;
		char ok = shm_arena_attach(target, -1, &sv, &why) == 0 &&
				  shm_arena_claim(&sv, __atomic_load_n(&sv.hdr->use, __ATOMIC_ACQUIRE))
			  ? 'y'
			  : 'n';
		if (write(up[1], &ok, 1) != 1)
			_exit(2);
		char b;
		(void)!read(hold[0], &b, 1); /* until killed */
		_exit(0);
	}
	shunt_after_fork_parent();
	close(up[1]);
	close(hold[0]);
	char ok = 0;
	cr_assert_eq(read(up[0], &ok, 1), 1);
	cr_assert_eq(ok, 'y', "the child could not claim the slot");
	cr_assert(shm_arena_side_held(&c, SHM_SERVER), "a live server's hold not seen");
	kill(pid, SIGKILL);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert_not(shm_arena_side_held(&c, SHM_SERVER), "a killed server still holds the slot");
	shm_arena_release(&c);
}

/* An end shared with a forked child: the slot stays held while either
 * uses it, whichever lets go first. */
Test(shm_arena, a_forked_end_holds_the_slot_until_both_processes_let_go)
{
	struct shm_slot c, sv;
	char target[96];
	alloc(&c, target);
	attach_claim(target, &sv);
	int up[2], go[2];
	cr_assert_eq(pipe(up), 0);
	cr_assert_eq(pipe(go), 0);
	cr_assert_eq(shm_arena_fork(&sv), 0);
	shunt_before_fork();
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(up[0]);
		close(go[1]);
		shunt_after_fork_child();
		shm_arena_forked(&sv, 1);
		char b = 'r';
		if (write(up[1], &b, 1) != 1 || read(go[0], &b, 1) != 1)
			_exit(2);
		shm_arena_release(&sv);
		b = 'd';
		_exit(write(up[1], &b, 1) == 1 ? 0 : 2);
	}
	shunt_after_fork_parent();
	close(up[1]);
	close(go[0]);
	shm_arena_forked(&sv, 0);
	char b = 0;
	cr_assert_eq(read(up[0], &b, 1), 1);
	cr_assert_eq(b, 'r');
	/* The parent lets go first: the child's end still holds. */
	shm_arena_release(&sv);
	cr_assert(shm_arena_side_held(&c, SHM_SERVER), "the child's end was not seen");
	cr_assert_eq(write(go[1], "x", 1), 1);
	cr_assert_eq(read(up[0], &b, 1), 1);
	cr_assert_eq(b, 'd');
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	cr_assert_not(shm_arena_side_held(&c, SHM_SERVER), "held after both let go");
	shm_arena_release(&c);
}
