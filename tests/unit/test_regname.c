/* The listener registry's entry names (core/shunt_regname.c): what the
 * library writes, shunt stat -l and shunt ab read back. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <string.h>

#include "shunt_regname.h"
#include "shunt_tuple.h"

static void v4(const char *ip, uint8_t a[16])
{
	memset(a, 0, 16);
	a[10] = a[11] = 0xff;
	cr_assert_eq(inet_pton(AF_INET, ip, a + 12), 1);
}

static void v6(const char *ip, uint8_t a[16])
{
	cr_assert_eq(inet_pton(AF_INET6, ip, a), 1);
}

static void round_trip(const uint8_t a[16], unsigned long ns, unsigned port, const char *want)
{
	char name[SHUNT_REGNAME_MAX];
	struct shunt_regname r;
	shunt_regname_format(name, sizeof(name), ns, a, port);
	cr_assert_str_eq(name, want);
	cr_assert_eq(shunt_regname_parse(name, &r), 0, "%s", name);
	cr_assert_eq(r.port, port);
	cr_assert_eq(r.any, shunt_addr16_any(a));
	if (!r.any)
		cr_assert_eq(memcmp(r.addr, a, 16), 0, "%s: address", name);
	cr_assert_eq(r.host_wide, !r.any && !shunt_addr16_loopback(a));
	cr_assert_eq(r.netns, r.host_wide ? 0 : ns);
}

Test(regname, round_trip)
{
	uint8_t a[16];
	v4("127.0.0.1", a);
	round_trip(a, 4026531840ul, 6379, "n4026531840-00000000000000000000ffff7f000001-6379");
	v6("::1", a);
	round_trip(a, 7, 80, "n7-00000000000000000000000000000001-80");
	v4("0.0.0.0", a);
	round_trip(a, 7, 11111, "n7-any-11111");
	v6("::", a);
	round_trip(a, 7, 1, "n7-any-1");
	v4("198.18.0.2", a);
	round_trip(a, 7, 65535, "g-00000000000000000000ffffc6120002-65535");
	v6("fd00::5", a);
	round_trip(a, 7, 443, "g-fd000000000000000000000000000005-443");
}

Test(regname, rejects_what_format_never_writes)
{
	static const char *const bad[] = {
		"", ".n7-any-5.tmp", "n7-any-0", "n7-any-65536", "n7-any-080", "n-any-5",
		"nx-any-5", "g-any-5", "n7-any-", "n7-any-5x",
		"g-00000000000000000000ffffc612000-5",      /* 31 digits */
		"g-00000000000000000000ffffc612000g-5",     /* not hex */
		"g-00000000000000000000FFFFC6120002-5",     /* upper case */
		"g-00000000000000000000ffff7f000001-5",     /* loopback is per netns */
		"n7-00000000000000000000ffffc6120002-5",    /* others are host-wide */
		"n7-00000000000000000000000000000000-5",    /* any is spelt "any" */
		"n99999999999999999999999-any-5",
	};
	struct shunt_regname r;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(shunt_regname_parse(bad[i], &r), -1, "'%s' accepted", bad[i]);
}
