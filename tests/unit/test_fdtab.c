/* The fd table: growth past 65535, reset on reuse, ranges, concurrency. */
#include <criterion/criterion.h>
#include <pthread.h>

#include "core/shunt_fdtab.h"

static void set_kind(int fd, enum shunt_fd_kind k)
{
	struct shunt_fd *e = shunt_fd_get(fd);
	cr_assert_not_null(e, "fd %d has no entry", fd);
	__atomic_store_n(&e->kind, k, __ATOMIC_RELEASE);
}

Test(fdtab, unmapped_fd_has_no_entry)
{
	cr_expect_null(shunt_fd_peek(500000));
	cr_expect_null(shunt_fd_accel(500000));
	cr_expect_null(shunt_fd_peek(-1));
	cr_expect_null(shunt_fd_get(-1));
	cr_expect_null(shunt_fd_get(SHUNT_FDTAB_MAX_FD));
}

Test(fdtab, grows_past_65535_to_the_kernel_limit)
{
	int fds[] = {0, 1023, 1024, 65535, 65536, 70000, 1 << 20, SHUNT_FDTAB_MAX_FD - 1};
	unsigned before = shunt_fdtab_chunks();
	for (size_t i = 0; i < sizeof fds / sizeof *fds; i++) {
		set_kind(fds[i], SHUNT_FD_ACCEL);
		cr_expect_not_null(shunt_fd_accel(fds[i]), "fd %d", fds[i]);
	}
	/* 0 and 1023 share a chunk; 65535 and 65536 do not. */
	cr_expect_eq(shunt_fdtab_chunks() - before, 7);
	cr_expect_geq(shunt_fdtab_limit(), (unsigned)SHUNT_FDTAB_MAX_FD);
	for (size_t i = 0; i < sizeof fds / sizeof *fds; i++)
		shunt_fd_reset(fds[i]);
}

Test(fdtab, reset_clears_every_field)
{
	struct shunt_fd *e = shunt_fd_get(77);
	e->role = 2;
	e->reason = 5;
	e->flags = SHUNT_FDF_NONBLOCK;
	e->conn = (struct shunt_conn *)e;
	set_kind(77, SHUNT_FD_KERNEL);
	shunt_fd_reset(77);
	cr_expect_eq(shunt_fd_kind(e), SHUNT_FD_UNKNOWN);
	cr_expect_eq(e->role, 0);
	cr_expect_eq(e->reason, 0);
	cr_expect_eq(e->flags, 0);
	cr_expect_null(e->conn);
	/* The entry is reused, not reallocated. */
	cr_expect_eq(shunt_fd_get(77), e);
}

Test(fdtab, reset_range_spans_chunks_and_stops_at_hi)
{
	for (int fd = 1000; fd < 3100; fd++)
		set_kind(fd, SHUNT_FD_TCP);
	shunt_fd_reset_range(1010, 3000);
	cr_expect_eq(shunt_fd_kind(shunt_fd_peek(1009)), SHUNT_FD_TCP);
	cr_expect_eq(shunt_fd_kind(shunt_fd_peek(1010)), SHUNT_FD_UNKNOWN);
	cr_expect_eq(shunt_fd_kind(shunt_fd_peek(2048)), SHUNT_FD_UNKNOWN);
	cr_expect_eq(shunt_fd_kind(shunt_fd_peek(3000)), SHUNT_FD_UNKNOWN);
	cr_expect_eq(shunt_fd_kind(shunt_fd_peek(3001)), SHUNT_FD_TCP);
	/* closefrom(): open-ended. */
	shunt_fd_reset_range(0, ~0u);
	cr_expect_eq(shunt_fd_kind(shunt_fd_peek(3099)), SHUNT_FD_UNKNOWN);
	cr_expect_eq(shunt_fd_kind(shunt_fd_peek(1009)), SHUNT_FD_UNKNOWN);
}

struct seen {
	int n;
	int fds[8];
};

static void collect(int fd, struct shunt_fd *e, void *arg)
{
	struct seen *s = arg;
	(void)e;
	if (s->n < 8)
		s->fds[s->n] = fd;
	s->n++;
}

Test(fdtab, foreach_visits_in_fd_order_above_min_kind)
{
	set_kind(5000, SHUNT_FD_ACCEL);
	set_kind(70001, SHUNT_FD_KERNEL);
	set_kind(4, SHUNT_FD_ACCEL);
	set_kind(6, SHUNT_FD_OTHER);
	struct seen s = {0};
	shunt_fd_foreach(SHUNT_FD_KERNEL, collect, &s);
	cr_assert_eq(s.n, 3);
	cr_expect_eq(s.fds[0], 4);
	cr_expect_eq(s.fds[1], 5000);
	cr_expect_eq(s.fds[2], 70001);
	shunt_fd_reset_range(0, ~0u);
}

static void *grab(void *arg)
{
	return shunt_fd_get((int)(long)arg);
}

Test(fdtab, racing_threads_map_one_chunk)
{
	enum { N = 8 };
	pthread_t t[N];
	void *r[N];
	unsigned before = shunt_fdtab_chunks();
	int base = 9 << 20;
	for (long i = 0; i < N; i++)
		pthread_create(&t[i], NULL, grab, (void *)(base + i));
	for (int i = 0; i < N; i++)
		pthread_join(t[i], &r[i]);
	cr_expect_eq(shunt_fdtab_chunks() - before, 1);
	for (int i = 1; i < N; i++)
		cr_expect_eq((struct shunt_fd *)r[i] - (struct shunt_fd *)r[0], i);
}
