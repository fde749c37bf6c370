/* SPDX-License-Identifier: ISC */
/*
 * Grant sets: the entries of one list (egress_hosts, egress_allow_private,
 * a manifest's [egress] hosts) in an open-addressing hash table, so that a
 * decision costs at most one lookup for the exact host and one per
 * candidate suffix of the request host, whatever the number of entries.
 * Keys carry a tag: IPv4 and IPv6 literals are keyed by family and bytes,
 * exact names and suffixes by their text. An entry that does not survive
 * re-validation here (one that escaped policy_entry_parse, such as a
 * literal "*") is kept for listing but never matches: it fails closed.
 * The hash is SipHash-2-4 keyed per set from addresses ASLR places, so a
 * manifest author cannot precompute colliding entries.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

#define GRANT_CHUNK	256	   /* entries per storage chunk */
#define GRANT_MAX	(1u << 30) /* entries per set */

/* Key tags. Matching only ever looks up the live ones. */
#define TAG_V4		'4'
#define TAG_V6		'6'
#define TAG_EXACT	'E'
#define TAG_SUFFIX	'S'
#define TAG_DEAD_EXACT	'x'
#define TAG_DEAD_SUFFIX 'y'
#define TAG_DEAD_OTHER	'z'

struct grant_slot {
	uint64_t hash;
	uint32_t idx; /* entry index + 1; 0 is an empty slot */
};

struct grant_entry {
	struct policy_entry e;
	char tag;
};

struct policy_grant {
	struct grant_entry **chunks;
	size_t nchunks;
	size_t n;
	struct grant_slot *slots;
	size_t cap; /* power of two, 0 before the first add */
	uint64_t k0, k1;
};

/* ---- SipHash-2-4 ------------------------------------------------------ */

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND \
	do { \
		v0 += v1; \
		v1 = ROTL(v1, 13); \
		v1 ^= v0; \
		v0 = ROTL(v0, 32); \
		v2 += v3; \
		v3 = ROTL(v3, 16); \
		v3 ^= v2; \
		v0 += v3; \
		v3 = ROTL(v3, 21); \
		v3 ^= v0; \
		v2 += v1; \
		v1 = ROTL(v1, 17); \
		v1 ^= v2; \
		v2 = ROTL(v2, 32); \
	} while (0)

/*
 * Hash the tag byte followed by the bytes base[off..end). The next byte
 * comes from its own index, checked against end where it is read.
 */
static uint64_t
grant_hash(const struct policy_grant *g, char tag, const uint8_t *base,
    size_t off, size_t end)
{
	uint64_t v0 = g->k0 ^ 0x736f6d6570736575ULL;
	uint64_t v1 = g->k1 ^ 0x646f72616e646f6dULL;
	uint64_t v2 = g->k0 ^ 0x6c7967656e657261ULL;
	uint64_t v3 = g->k1 ^ 0x7465646279746573ULL;
	uint64_t m, b;
	size_t total = end - off + 1, pos = 0, j = off;
	int k, first = 1;

	/* Process the virtual message tag || base[off..end), eight bytes at
	 * a time, little-endian. */
	while (total - pos >= 8) {
		m = 0;
		for (k = 0; k < 8; k++) {
			uint8_t c = 0;

			if (first) {
				c = (uint8_t)tag;
				first = 0;
			} else if (j < end)
				c = base[j++];
			m |= (uint64_t)c << (8 * k);
		}
		v3 ^= m;
		SIPROUND;
		SIPROUND;
		v0 ^= m;
		pos += 8;
	}
	b = (uint64_t)total << 56;
	for (k = 0; k < 8 && pos + (size_t)k < total; k++) {
		uint8_t c = 0;

		if (first) {
			c = (uint8_t)tag;
			first = 0;
		} else if (j < end)
			c = base[j++];
		b |= (uint64_t)c << (8 * k);
	}
	v3 ^= b;
	SIPROUND;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

/* ---- Keys ------------------------------------------------------------- */

static size_t
name_len(const struct policy_host *h)
{
	return strnlen(h->name, sizeof(h->name));
}

/*
 * Answer whether e is exactly what policy_entry_parse() could have
 * produced, as far as can be checked without the public-suffix list: its
 * text re-parses as a host of the same kind and bytes, and a suffix is a
 * name of two labels or more.
 */
static int
entry_is_sane(const struct policy_entry *e)
{
	char buf[POLICY_NAME_MAX + 3] = { 0 };
	struct policy_host h;
	size_t n = name_len(&e->host), nl = n;

	memset(&h, 0, sizeof(h));

	if (n == 0 || n > POLICY_NAME_MAX)
		return 0;
	if (e->kind != POLICY_ENTRY_EXACT && e->kind != POLICY_ENTRY_SUFFIX)
		return 0;
	if (e->host.kind == POLICY_HOST_IPV6) {
		buf[0] = '[';
		memcpy(buf + 1, e->host.name, n);
		buf[n + 1] = ']';
		n += 2;
	} else
		memcpy(buf, e->host.name, n);
	buf[n] = '\0';
	if (policy_host_parse(buf, n, &h, NULL) != 0)
		return 0;
	/* e's name ends at nl: compare that many bytes and h's length. */
	if (h.kind != e->host.kind || strnlen(h.name, sizeof(h.name)) != nl ||
	    memcmp(h.name, e->host.name, nl) != 0)
		return 0;
	switch (h.kind) {
	case POLICY_HOST_NAME:
		if (e->kind == POLICY_ENTRY_SUFFIX &&
		    strchr(h.name, '.') == NULL)
			return 0;
		return 1;
	case POLICY_HOST_IPV4:
		return e->kind == POLICY_ENTRY_EXACT &&
		    memcmp(h.addr, e->host.addr, 4) == 0;
	case POLICY_HOST_IPV6:
		return e->kind == POLICY_ENTRY_EXACT &&
		    memcmp(h.addr, e->host.addr, 16) == 0;
	}
	return 0;
}

/*
 * The bytes an entry of key tag tag is keyed by: *ret_base[0..*ret_end).
 * The tag is the caller's (equal to the entry's), so that the key's
 * object and length follow from it.
 */
static void
entry_key(const struct policy_entry *e, char tag, const uint8_t **ret_base,
    size_t *ret_end)
{
	switch (tag) {
	case TAG_V4:
		*ret_base = e->host.addr;
		*ret_end = 4;
		break;
	case TAG_V6:
		*ret_base = e->host.addr;
		*ret_end = 16;
		break;
	default:
		*ret_base = (const uint8_t *)e->host.name;
		*ret_end = name_len(&e->host);
		break;
	}
}

/*
 * Answer whether the key of e under tag equals base[off..end). Each side
 * is read at its own index, checked against its own bound.
 */
static int
key_equal(const struct policy_entry *e, char tag, const uint8_t *base,
    size_t off, size_t end)
{
	const uint8_t *kp;
	size_t klen, i, j;

	entry_key(e, tag, &kp, &klen);
	if (klen != end - off)
		return 0;
	for (i = 0, j = off; j < end; i++, j++)
		if (i >= klen || kp[i] != base[j])
			return 0;
	return 1;
}

static char
entry_tag(const struct policy_entry *e)
{
	if (!entry_is_sane(e)) {
		if (e->kind == POLICY_ENTRY_EXACT)
			return TAG_DEAD_EXACT;
		if (e->kind == POLICY_ENTRY_SUFFIX)
			return TAG_DEAD_SUFFIX;
		return TAG_DEAD_OTHER;
	}
	if (e->kind == POLICY_ENTRY_SUFFIX)
		return TAG_SUFFIX;
	if (e->host.kind == POLICY_HOST_IPV4)
		return TAG_V4;
	if (e->host.kind == POLICY_HOST_IPV6)
		return TAG_V6;
	return TAG_EXACT;
}

static struct grant_entry *
grant_at(const struct policy_grant *g, size_t i)
{
	return &g->chunks[i / GRANT_CHUNK][i % GRANT_CHUNK];
}

/* Return the entry keyed by (tag, base[off..end)), or NULL. */
static const struct grant_entry *
grant_lookup(const struct policy_grant *g, char tag, const uint8_t *base,
    size_t off, size_t end)
{
	uint64_t h;
	size_t i, mask;

	if (g == NULL || g->cap == 0)
		return NULL;
	h = grant_hash(g, tag, base, off, end);
	mask = g->cap - 1;
	for (i = (size_t)h & mask;; i = (i + 1) & mask) {
		const struct grant_entry *ge;
		uint32_t idx = g->slots[i].idx;

		if (idx == 0)
			break;
		if (g->slots[i].hash != h)
			continue;
		ge = grant_at(g, idx - 1);
		if (ge->tag != tag)
			continue;
		if (key_equal(&ge->e, tag, base, off, end))
			return ge;
	}
	return NULL;
}

static void
slot_insert(struct grant_slot *slots, size_t cap, uint64_t h, uint32_t idx)
{
	size_t i, mask = cap - 1;

	for (i = (size_t)h & mask; slots[i].idx != 0; i = (i + 1) & mask)
		;
	slots[i].hash = h;
	slots[i].idx = idx;
}

/* Keep the load factor at or below one half. */
static int
grant_grow(struct policy_grant *g)
{
	struct grant_slot *ns;
	size_t ncap, i;

	if (g->cap != 0 && (g->n + 1) * 2 <= g->cap)
		return 0;
	ncap = g->cap == 0 ? 16 : g->cap * 2;
	if ((ns = calloc(ncap, sizeof(*ns))) == NULL)
		return EGRESS_ERR_NOMEM;
	for (i = 0; i < g->cap; i++)
		if (g->slots[i].idx != 0)
			slot_insert(ns, ncap, g->slots[i].hash,
			    g->slots[i].idx);
	free(g->slots);
	g->slots = ns;
	g->cap = ncap;
	return 0;
}

/* ---- Public ----------------------------------------------------------- */

struct policy_grant *
policy_grant_new(void)
{
	static const char anchor;
	struct policy_grant *g;
	uintptr_t a, b;

	if ((g = calloc(1, sizeof(*g))) == NULL)
		return NULL;
	/* No syscalls here: key from where the allocator and loader put us. */
	a = (uintptr_t)g;
	b = (uintptr_t)&anchor;
	g->k0 = (uint64_t)a * 0x9e3779b97f4a7c15ULL ^ (uint64_t)b;
	g->k1 = (uint64_t)b * 0xc2b2ae3d27d4eb4fULL ^ ROTL((uint64_t)a, 29);
#ifdef __FRAMAC__
	/* The analysis knows numbers taken from addresses only as a mix of
	 * them, so it takes the key as any value instead. */
	{
		static volatile uint64_t any_key;

		g->k0 = any_key;
		g->k1 = any_key;
	}
#endif
	return g;
}

void
policy_grant_free(struct policy_grant *g)
{
	size_t i;

	if (g == NULL)
		return;
	for (i = 0; i < g->nchunks; i++)
		free(g->chunks[i]);
	free(g->chunks);
	free(g->slots);
	free(g);
}

int
policy_grant_add(struct policy_grant *g, const struct policy_entry *entry)
{
	struct grant_entry ge;
	const uint8_t *kp;
	size_t klen;

	if (g == NULL || entry == NULL)
		return EGRESS_ERR_INVALID;
	memset(&ge, 0, sizeof(ge));
	ge.e = *entry;
	/* Keep the copy NUL-terminated whatever the caller passed. */
	ge.e.host.name[POLICY_NAME_MAX] = '\0';
	ge.tag = entry_tag(&ge.e);
	/* One analysis per tag: the key's object and length follow. */
	/*@ split ge.tag; */
	entry_key(&ge.e, ge.tag, &kp, &klen);
	if (grant_lookup(g, ge.tag, kp, 0, klen) != NULL)
		return 0;
	if (g->n >= GRANT_MAX)
		return EGRESS_ERR_NOMEM;
	if (g->n / GRANT_CHUNK >= g->nchunks) {
		struct grant_entry **nc, *c;

		// NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers
		nc = realloc(g->chunks, (g->nchunks + 1) * sizeof(*nc));
		if (nc == NULL)
			return EGRESS_ERR_NOMEM;
		g->chunks = nc;
		if ((c = calloc(GRANT_CHUNK, sizeof(*c))) == NULL)
			return EGRESS_ERR_NOMEM;
		g->chunks[g->nchunks++] = c;
	}
	if (grant_grow(g) != 0)
		return EGRESS_ERR_NOMEM;
	*grant_at(g, g->n) = ge;
	slot_insert(g->slots, g->cap, grant_hash(g, ge.tag, kp, 0, klen),
	    (uint32_t)(g->n + 1));
	g->n++;
	return 0;
}

size_t
policy_grant_count(const struct policy_grant *g)
{
	return g == NULL ? 0 : g->n;
}

const struct policy_entry *
policy_grant_entry(const struct policy_grant *g, size_t i)
{
	if (g == NULL || i >= g->n)
		return NULL;
	return &grant_at(g, i)->e;
}

/* Answer whether g holds "*.t" for t equal to name or any suffix of it. */
static int
grant_has_suffix_at_or_above(const struct policy_grant *g, const char *name,
    size_t n)
{
	size_t i;

	if (grant_lookup(g, TAG_SUFFIX, (const uint8_t *)name, 0, n) != NULL)
		return 1;
	for (i = 0; i < n; i++)
		if (name[i] == '.' &&
		    grant_lookup(g, TAG_SUFFIX, (const uint8_t *)name, i + 1,
			n) != NULL)
			return 1;
	return 0;
}

int
policy_grant_matches(const struct policy_grant *g,
    const struct policy_host *host)
{
	size_t n, i;

	if (g == NULL || g->n == 0 || host == NULL)
		return 0;
	switch (host->kind) {
	case POLICY_HOST_IPV4:
		return grant_lookup(g, TAG_V4, host->addr, 0, 4) != NULL;
	case POLICY_HOST_IPV6:
		return grant_lookup(g, TAG_V6, host->addr, 0, 16) != NULL;
	case POLICY_HOST_NAME:
		break;
	default:
		return 0;
	}
	n = name_len(host);
	if (n == 0 || n > POLICY_NAME_MAX)
		return 0;
	if (grant_lookup(g, TAG_EXACT, (const uint8_t *)host->name, 0, n) !=
	    NULL)
		return 1;
	/* "*.s" matches strict subdomains: only suffixes after a dot. */
	for (i = 0; i < n; i++)
		if (host->name[i] == '.' &&
		    grant_lookup(g, TAG_SUFFIX, (const uint8_t *)host->name,
			i + 1, n) != NULL)
			return 1;
	return 0;
}

int
policy_grant_covers(const struct policy_grant *g,
    const struct policy_entry *entry)
{
	if (g == NULL || entry == NULL || !entry_is_sane(entry))
		return 0;
	if (entry->kind == POLICY_ENTRY_EXACT)
		return policy_grant_matches(g, &entry->host);
	return grant_has_suffix_at_or_above(g, entry->host.name,
	    name_len(&entry->host));
}
