/* SPDX-License-Identifier: ISC */
/*
 * Differential test of policy/inet.c against glibc: policy_inet6_parse()
 * must accept exactly the texts inet_pton(AF_INET6) accepts, with the same
 * bytes, and policy_inet6_format() / policy_inet4_format() must write
 * exactly what inet_ntop() writes. Random texts over the IPv6 alphabet and
 * random addresses biased towards zero groups, with a fixed seed.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/inet.h"

static unsigned long long rng = 0x9e3779b97f4a7c15ULL;

static unsigned
rnd(unsigned n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng % n);
}

static int
check_text(const char *t, size_t len)
{
	uint8_t a[16], b[16];
	char z[64];
	int ra, rb;

	memcpy(z, t, len);
	z[len] = '\0';
	memset(a, 0xaa, sizeof(a));
	memset(b, 0xaa, sizeof(b));
	ra = inet_pton(AF_INET6, z, a) == 1;
	rb = policy_inet6_parse(t, len, b);
	if (ra != rb || (ra && memcmp(a, b, 16) != 0)) {
		fprintf(stderr, "parse differs on '%s': glibc %d, policy %d\n",
		    z, ra, rb);
		return 1;
	}
	return 0;
}

/* Check texts one edit away from the valid text p. */
static int
mutate(const char *p)
{
	static const char alpha[] = "0123456789abcdefABCDEF:.";
	char t[64];
	size_t len = strlen(p), k, at;
	int i;

	for (i = 0; i < 8; i++) {
		memcpy(t, p, len + 1);
		at = rnd((unsigned)len + 1);
		k = len;
		switch (rnd(3)) {
		case 0: /* replace */
			if (at < len)
				t[at] = alpha[rnd(sizeof(alpha) - 1)];
			break;
		case 1: /* delete */
			if (at < len) {
				memmove(t + at, t + at + 1, len - at);
				k--;
			}
			break;
		default: /* insert */
			memmove(t + at + 1, t + at, len - at + 1);
			t[at] = alpha[rnd(sizeof(alpha) - 1)];
			k++;
			break;
		}
		if (check_text(t, k) != 0)
			return 1;
	}
	return 0;
}

static int
check_addr(const uint8_t a[16])
{
	char g[INET6_ADDRSTRLEN], p[POLICY_INET6_TEXT], g4[16], p4[16];
	uint8_t back[16];
	int n;

	if (inet_ntop(AF_INET6, a, g, sizeof(g)) == NULL)
		return 1;
	n = policy_inet6_format(a, p, sizeof(p));
	if (n < 0 || strcmp(g, p) != 0 || (size_t)n != strlen(p)) {
		fprintf(stderr, "format differs: glibc '%s', policy '%s'\n", g,
		    p);
		return 1;
	}
	if (policy_inet6_parse(p, (size_t)n, back) != 1 ||
	    memcmp(back, a, 16) != 0) {
		fprintf(stderr, "'%s' does not parse back\n", p);
		return 1;
	}
	(void)inet_ntop(AF_INET, a + 12, g4, sizeof(g4));
	n = policy_inet4_format(a + 12, p4);
	if (strcmp(g4, p4) != 0 || (size_t)n != strlen(p4)) {
		fprintf(stderr, "IPv4 format differs: '%s', '%s'\n", g4, p4);
		return 1;
	}
	if (check_text(p, strlen(p)) != 0)
		return 1;
	return mutate(p);
}

int
main(void)
{
	static const char alpha[] = "0123456789abcdefABCDEF::::...";
	static const char *const fixed[] = {
		"",
		":",
		"::",
		":::",
		"::1",
		"1::",
		"1:2:3:4:5:6:7:8",
		"1:2:3:4:5:6:7:8:9",
		"1:2:3:4:5:6:7::",
		"::2:3:4:5:6:7:8",
		"1:2:3:4:5:6:7:",
		":1:2:3:4:5:6:7",
		"1::2::3",
		"::ffff:1.2.3.4",
		"::1.2.3.4",
		"1.2.3.4",
		"::ffff:01.2.3.4",
		"::ffff:1.2.3",
		"::ffff:1.2.3.4.",
		"::ffff:1.2.3.4.5",
		"::ffff:256.2.3.4",
		"::ffff:1.2.3.4:5",
		"1:2:3:4:5:6:1.2.3.4",
		"1:2:3:4:5:6:7:1.2.3.4",
		"12345::",
		"0000:0::",
		"::00000",
		"fe80::1%eth0",
		"::1.2.3.4x",
		"64:ff9b::192.0.2.33",
		"::ffff:0.0.0.0",
		"1:2:3:4:5:6:7::8",
	};
	uint8_t a[16];
	char t[48];
	size_t i, j, len;
	int bad = 0;

	for (i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		bad |= check_text(fixed[i], strlen(fixed[i]));
	for (i = 0; i < 2000000 && !bad; i++) {
		len = rnd(46);
		for (j = 0; j < len; j++)
			t[j] = alpha[rnd(sizeof(alpha) - 1)];
		bad |= check_text(t, len);
	}
	for (i = 0; i < 1000000 && !bad; i++) {
		for (j = 0; j < 16; j += 2) {
			unsigned k = rnd(8);

			a[j] = k < 5 ? 0 : (uint8_t)rnd(256);
			a[j + 1] = k < 5 ? 0 : k == 5 ? 1 : (uint8_t)rnd(256);
			if (k == 7 && j == 10)
				a[j] = a[j + 1] = 0xff;
		}
		bad |= check_addr(a);
	}
	if (bad)
		return 1;
	printf("inet_diff: policy/inet.c agrees with glibc\n");
	return 0;
}
