/* SPDX-License-Identifier: ISC */
/*
 * Address classification. Every address falls in one class (public,
 * private, loopback, reserved, metadata) by the tables below; every
 * address this host delivers locally (its own addresses and its local
 * routes, from the context) is loopback unless it is reserved or metadata. An
 * address that embeds an IPv4 address (IPv4-mapped, IPv4-compatible,
 * 6to4, Teredo) is checked for the metadata addresses first, and a NAT64
 * address is classified by every IPv4 address it translates to (nat64.c),
 * so its mask may hold several classes. The verdict (verdict.c) turns
 * masks into reasons. Sits above both addr.c and nat64.c, which do not
 * depend on it.
 */
#include <string.h>

#include "policy/nat64.h"
#include "policy/policy.h"

struct v4_range {
	uint32_t net;
	unsigned bits;
};

struct v6_range {
	uint8_t net[16];
	unsigned bits;
};

#define V4(a, b, c, d) \
	(((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) | \
	    ((uint32_t)(c) << 8) | (uint32_t)(d))

static const struct v4_range v4_metadata[] = {
	{ V4(169, 254, 0, 0), 16 },
	{ V4(100, 100, 100, 200), 32 }, /* Alibaba Cloud */
	{ V4(168, 63, 129, 16), 32 },	/* Azure wireserver */
};

static const struct v4_range v4_reserved[] = {
	{ V4(0, 0, 0, 0), 8 }, { V4(192, 0, 0, 0), 24 },
	{ V4(192, 0, 2, 0), 24 }, { V4(192, 88, 99, 0), 24 },
	{ V4(198, 18, 0, 0), 15 }, { V4(198, 51, 100, 0), 24 },
	{ V4(203, 0, 113, 0), 24 }, { V4(224, 0, 0, 0), 4 },
	{ V4(240, 0, 0, 0), 4 }, /* includes 255.255.255.255 */
};

static const struct v4_range v4_loopback = { V4(127, 0, 0, 0), 8 };

static const struct v4_range v4_private[] = {
	{ V4(10, 0, 0, 0), 8 },
	{ V4(100, 64, 0, 0), 10 },
	{ V4(172, 16, 0, 0), 12 },
	{ V4(192, 168, 0, 0), 16 },
};

static const struct v6_range v6_metadata[] = {
	{ { 0xfd, 0x00, 0x0e, 0xc2 }, 64 }, /* AWS IMDS */
	{ { 0xfd, 0x20, 0x00, 0xce, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54 },
	    128 }, /* GCP */
};

/* Globally reachable exceptions inside 2001::/23 (IANA special registry). */
static const struct v6_range v6_2001_global[] = {
	{ { 0x20, 0x01, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01 },
	    128 },
	{ { 0x20, 0x01, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02 },
	    128 },
	{ { 0x20, 0x01, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x03 },
	    128 },
	{ { 0x20, 0x01, 0x00, 0x03 }, 32 },
	{ { 0x20, 0x01, 0x00, 0x04, 0x01, 0x12 }, 48 },
	{ { 0x20, 0x01, 0x00, 0x20 }, 27 },
};

static const struct v6_range v6_reserved[] = {
	{ { 0x00, 0x64, 0xff, 0x9b, 0x00, 0x01 }, 48 }, /* local NAT64 */
	{ { 0x01, 0x00 }, 64 },				/* discard */
	{ { 0x20, 0x01, 0x0d, 0xb8 }, 32 },
	{ { 0x3f, 0xff }, 20 },
	{ { 0x5f, 0x00 }, 16 },
	{ { 0xff, 0x00 }, 8 },
};

static const struct v6_range v6_private[] = {
	{ { 0xfc, 0x00 }, 7 },
	{ { 0xfe, 0x80 }, 10 },
	{ { 0xfe, 0xc0 }, 10 },
};

static const struct v6_range v6_2001_23 = { { 0x20, 0x01 }, 23 };
static const struct v6_range v6_teredo = { { 0x20, 0x01 }, 32 };
static const struct v6_range v6_6to4 = { { 0x20, 0x02 }, 16 };
static const struct v6_range v6_global = { { 0x20 }, 3 };
static const struct v6_range v6_mapped = {
	{ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff }, 96
};
static const struct v6_range v6_compat = { { 0 }, 96 };
static const uint8_t v6_loopback[16] = { [15] = 1 };
static const uint8_t v6_unspecified[16];

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static uint32_t
v4_word(const uint8_t b[4])
{
	return ((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) |
	    ((uint32_t)b[2] << 8) | (uint32_t)b[3];
}

static int
v4_in(const struct v4_range *r, size_t n, const uint8_t b[4])
{
	uint32_t a = v4_word(b), mask;
	size_t i;

	for (i = 0; i < n; i++) {
		mask = r[i].bits == 0 ? 0 : ~(uint32_t)0 << (32 - r[i].bits);
		if ((a & mask) == r[i].net)
			return 1;
	}
	return 0;
}

static int
v6_match(const struct v6_range *r, const uint8_t b[16])
{
	unsigned whole = r->bits / 8, rest = r->bits % 8;
	uint8_t mask;

	if (memcmp(r->net, b, whole) != 0)
		return 0;
	if (rest == 0)
		return 1;
	mask = (uint8_t)(0xff << (8 - rest));
	return (b[whole] & mask) == (r->net[whole] & mask);
}

static int
v6_in(const struct v6_range *r, size_t n, const uint8_t b[16])
{
	size_t i;

	for (i = 0; i < n; i++)
		if (v6_match(&r[i], b))
			return 1;
	return 0;
}

static int
v4_is_metadata(const uint8_t b[4])
{
	return v4_in(v4_metadata, NELEM(v4_metadata), b);
}

int
policy_net_cmp(const void *a, const void *b)
{
	const struct policy_net *x = a, *y = b;

	if (x->addr.family != y->addr.family)
		return x->addr.family < y->addr.family ? -1 : 1;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return memcmp(x->addr.bytes, y->addr.bytes, sizeof(x->addr.bytes));
}

/*
 * Return the index of the first net not below key within [lo, hi) of the
 * n sorted nets v (hi when none is).
 */
static size_t
nets_lower_bound(const struct policy_net *v, size_t n, size_t lo, size_t hi,
    const struct policy_net *key)
{
	size_t mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (mid >= n) /* never: lo < hi <= n; bounds the read */
			break;
		if (policy_net_cmp(&v[mid], key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Answer whether a local net of family (4 or 6) holds b. The nets of one
 * length sit together in the sorted array: for each length present, b
 * cut to it is searched among them, so the cost is a few searches (one
 * per length present), not one comparison per net.
 */
static int
in_local_nets(const struct policy_classify_ctx *ctx, int family,
    const uint8_t *b)
{
	struct policy_net key;
	unsigned len, max = family == 4 ? 32 : 128, k;
	size_t i, end, at;

	if (ctx == NULL || ctx->nets == NULL || ctx->nnets == 0)
		return 0;
	memset(&key, 0, sizeof(key));
	key.addr.family = family;
	i = nets_lower_bound(ctx->nets, ctx->nnets, 0, ctx->nnets, &key);
	while (i < ctx->nnets && ctx->nets[i].addr.family == family &&
	    ctx->nets[i].len <= max) {
		len = ctx->nets[i].len;
		/* The group of this length ends where length + 1 starts. */
		memset(&key, 0, sizeof(key));
		key.addr.family = family;
		key.len = len + 1;
		end = nets_lower_bound(ctx->nets, ctx->nnets, i, ctx->nnets,
		    &key);
		if (end <= i || end > ctx->nnets) /* unsorted: stop */
			return 0;
		key.len = len;
		for (k = 0; k < len / 8; k++)
			key.addr.bytes[k] = b[k];
		if (len % 8 != 0)
			key.addr.bytes[len / 8] = (uint8_t)(b[len / 8] &
			    (0xff << (8 - len % 8)));
		at = nets_lower_bound(ctx->nets, ctx->nnets, i, end, &key);
		if (at < end && at < ctx->nnets &&
		    policy_net_cmp(&ctx->nets[at], &key) == 0)
			return 1;
		i = end;
	}
	return 0;
}

/* Answer whether the IPv4 address b is one of this host's addresses, given
 * as IPv4 or as IPv4-mapped IPv6, or inside a prefix it delivers locally. */
static int
v4_is_local(const struct policy_classify_ctx *ctx, const uint8_t b[4])
{
	size_t i;

	if (in_local_nets(ctx, 4, b))
		return 1;
	if (ctx == NULL || ctx->local == NULL)
		return 0;
	for (i = 0; i < ctx->nlocal; i++) {
		const struct policy_addr *l = &ctx->local[i];

		if (l->family == 4 && memcmp(l->bytes, b, 4) == 0)
			return 1;
		if (l->family == 6 && v6_match(&v6_mapped, l->bytes) &&
		    memcmp(l->bytes + 12, b, 4) == 0)
			return 1;
	}
	return 0;
}

static int
v6_is_local(const struct policy_classify_ctx *ctx, const uint8_t b[16])
{
	size_t i;

	if (in_local_nets(ctx, 6, b))
		return 1;
	if (ctx == NULL || ctx->local == NULL)
		return 0;
	for (i = 0; i < ctx->nlocal; i++)
		if (ctx->local[i].family == 6 &&
		    memcmp(ctx->local[i].bytes, b, 16) == 0)
			return 1;
	return 0;
}

static unsigned
classify_v4(const struct policy_classify_ctx *ctx, const uint8_t b[4])
{
	if (v4_is_metadata(b))
		return POLICY_CLASS_METADATA;
	if (v4_in(v4_reserved, NELEM(v4_reserved), b))
		return POLICY_CLASS_RESERVED;
	if (v4_in(&v4_loopback, 1, b) || v4_is_local(ctx, b))
		return POLICY_CLASS_LOOPBACK;
	if (v4_in(v4_private, NELEM(v4_private), b))
		return POLICY_CLASS_PRIVATE;
	return POLICY_CLASS_PUBLIC;
}

/* An address that only embeds an IPv4 address for a transition mechanism
 * we do not carry: metadata when the embedded address is, else reserved. */
static unsigned
classify_embedded(const uint8_t b[4])
{
	return v4_is_metadata(b) ? POLICY_CLASS_METADATA :
				   POLICY_CLASS_RESERVED;
}

static unsigned
classify_v6_plain(const struct policy_classify_ctx *ctx, const uint8_t b[16])
{
	uint8_t client[4];
	size_t i;

	if (memcmp(b, v6_unspecified, 16) == 0)
		return POLICY_CLASS_RESERVED;
	if (memcmp(b, v6_loopback, 16) == 0)
		return POLICY_CLASS_LOOPBACK;
	if (v6_match(&v6_mapped, b))
		return classify_v4(ctx, b + 12);
	if (v6_match(&v6_compat, b))
		return classify_embedded(b + 12);
	if (v6_match(&v6_6to4, b))
		return classify_embedded(b + 2);
	if (v6_match(&v6_teredo, b)) {
		/* Server at bits 32-63, client obfuscated at bits 96-127. */
		for (i = 0; i < 4; i++)
			client[i] = (uint8_t)~b[12 + i];
		if (v4_is_metadata(b + 4) || v4_is_metadata(client))
			return POLICY_CLASS_METADATA;
		return POLICY_CLASS_RESERVED;
	}
	if (v6_in(v6_metadata, NELEM(v6_metadata), b))
		return POLICY_CLASS_METADATA;
	if (v6_in(v6_reserved, NELEM(v6_reserved), b))
		return POLICY_CLASS_RESERVED;
	if (v6_match(&v6_2001_23, b) &&
	    !v6_in(v6_2001_global, NELEM(v6_2001_global), b))
		return POLICY_CLASS_RESERVED;
	if (v6_in(v6_private, NELEM(v6_private), b))
		return v6_is_local(ctx, b) ? POLICY_CLASS_LOOPBACK :
					     POLICY_CLASS_PRIVATE;
	if (!v6_match(&v6_global, b))
		return POLICY_CLASS_RESERVED;
	if (v6_is_local(ctx, b))
		return POLICY_CLASS_LOOPBACK;
	return POLICY_CLASS_PUBLIC;
}

unsigned
policy_addr_classify(const struct policy_classify_ctx *ctx,
    const struct policy_addr *addr)
{
	uint8_t v4[POLICY_NAT64_DECODE_MAX][4] = { { 0 } };
	size_t i, n;
	unsigned mask = 0;

	/* Fail closed on what is not an address. */
	if (addr == NULL)
		return POLICY_CLASS_RESERVED;
	if (addr->family == 4)
		return classify_v4(ctx, addr->bytes);
	if (addr->family != 6)
		return POLICY_CLASS_RESERVED;

	n = policy_nat64_decode_all(ctx != NULL ? ctx->nat64 : NULL,
	    addr->bytes, v4);
	if (n == 0)
		return classify_v6_plain(ctx, addr->bytes);
	/*
	 * The translator delivers to each embedded address, so the raw class
	 * does not count. Three exceptions, all on the refusing side: the
	 * kernel never hands loopback, IPv4-mapped or its own addresses to a
	 * translator, so those deliveries count too; and metadata stays
	 * metadata whatever prefix an operator declares over it.
	 */
	for (i = 0; i < n; i++)
		mask |= classify_v4(ctx, v4[i]);
	if (v6_match(&v6_mapped, addr->bytes))
		mask |= classify_v4(ctx, addr->bytes + 12);
	if (memcmp(addr->bytes, v6_loopback, 16) == 0 ||
	    v6_is_local(ctx, addr->bytes))
		mask |= POLICY_CLASS_LOOPBACK;
	if (classify_v6_plain(ctx, addr->bytes) == POLICY_CLASS_METADATA)
		mask |= POLICY_CLASS_METADATA;
	return mask;
}
