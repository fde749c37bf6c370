/* SPDX-License-Identifier: ISC */
/*
 * policy: the one place where egressd decides reachability. Pure functions
 * of their inputs (libc only, no syscalls): the destination grammar shared
 * by operator entries, manifest declarations and request hosts; URL and
 * HOST:PORT parsing; the hashed grant set; address classification with
 * NAT64 decoding; and the verdict. Nothing else in the project may decide
 * whether an instance may reach a destination. docs/policy.md states every
 * rule and reason code implemented here.
 */
#ifndef EGRESS_POLICY_H
#define EGRESS_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include <egress/error.h>

#define POLICY_NAME_MAX	   253 /* bytes of a DNS name, no trailing dot */
#define POLICY_LABEL_MAX   63
#define POLICY_MSG_MAX	   256 /* bytes of an error message, with NUL */
#define POLICY_ANSWERS_MAX 64  /* addresses considered per answer set */
#define POLICY_NAT64_MAX   64  /* declared NAT64 prefixes */
/*
 * Text bound of policy_url_parse() as analysed: it takes longer text and
 * applies the same rules, but the absence of undefined behaviour is
 * proven (docs/reliability.md) for inputs up to this. A URL is a scheme,
 * "://", an authority and a path as a REQUEST bounds them (32 + 3 + 512 +
 * 16384 bytes).
 */
#define POLICY_URL_MAX	   16931

/* Failure details: a human-readable message, NUL-terminated. */
struct policy_err {
	char msg[POLICY_MSG_MAX];
};

/* ---- Hosts ------------------------------------------------------------ */

enum policy_host_kind {
	POLICY_HOST_NAME = 1,
	POLICY_HOST_IPV4 = 2,
	POLICY_HOST_IPV6 = 3,
};

/*
 * A parsed, canonical host. name holds the canonical text: a lowercase
 * A-label name without trailing dot, a canonical dotted quad, or the
 * inet_ntop() spelling of an IPv6 address (no brackets). For IP kinds, addr
 * holds the 4 or 16 network-order bytes.
 */
struct policy_host {
	enum policy_host_kind kind;
	char name[POLICY_NAME_MAX + 1];
	uint8_t addr[16];
};

/*
 * Parse a request host as it appears in a URL authority (IPv6 only inside
 * brackets) or in a HOST:PORT destination. ASCII letters are lowercased and
 * one trailing dot is removed; two or more, empty labels, bad characters
 * (including '_', '%', non-ASCII), zone ids, over-long labels or names, and
 * any host whose last label is numeric or 0x-hex but which is not a
 * canonical dotted quad are invalid. Write *ret_host on success.
 * Return 0, or EGRESS_ERR_INVALID with reterr filled.
 */
int policy_host_parse(const char *s, size_t len, struct policy_host *ret_host,
    struct policy_err *reterr);

/* ---- Entries (operator grants and manifest declarations) -------------- */

enum policy_entry_kind {
	POLICY_ENTRY_EXACT = 1,	 /* host.name is the exact host */
	POLICY_ENTRY_SUFFIX = 2, /* "*.s": host.name is s */
};

struct policy_entry {
	enum policy_entry_kind kind;
	struct policy_host host;
};

/*
 * Answer whether domain (canonical, lowercase) is an ICANN public suffix,
 * without the implicit "*" rule. Return 1 if it is, 0 if not. The policy
 * library stays libc-only, so the caller supplies this (conf/ wraps
 * libpsl).
 */
typedef int (*policy_psl_fn)(void *ctx, const char *domain);

/*
 * Parse one entry of egress_hosts, egress_allow_private or a manifest's
 * [egress] hosts. The text must already be canonical; a non-canonical
 * spelling is rejected with a message that shows the spelling to write.
 * psl is required: a wildcard whose suffix is a public suffix is rejected.
 * s holds len bytes (analysed for every len up to 1024, docs/reliability.md;
 * more than 255 are refused once the surrounding whitespace is trimmed).
 * Return 0 and write *ret_entry, or EGRESS_ERR_INVALID with reterr filled.
 */
int policy_entry_parse(const char *s, size_t len, policy_psl_fn psl,
    void *psl_ctx, struct policy_entry *ret_entry, struct policy_err *reterr);

/*
 * Format entry as it is written in a file ("host", "*.suffix", or an IP
 * literal) into buf of size n. Return the length, or EGRESS_ERR_TOO_BIG
 * (buf then holds what fits, NUL-terminated, as snprintf() leaves it).
 */
int policy_entry_format(const struct policy_entry *entry, char *buf, size_t n);

/* ---- Destinations ----------------------------------------------------- */

enum policy_transport {
	POLICY_TRANSPORT_HTTP = 1,
	POLICY_TRANSPORT_WEBSOCKET = 2,
	POLICY_TRANSPORT_TCP = 3,
	POLICY_TRANSPORT_TLS = 4,
};

/* Permission bits. */
#define POLICY_PERM_HTTP_CLIENT	     (1u << 0)
#define POLICY_PERM_WEBSOCKET_CLIENT (1u << 1)
#define POLICY_PERM_SOCKET_CLIENT    (1u << 2)

/*
 * Parse a permission name ("http_client", "websocket_client",
 * "socket_client"). Return its POLICY_PERM_* bit, or EGRESS_ERR_INVALID.
 */
int policy_permission_parse(const char *s, size_t len);

/* Return the name of one POLICY_PERM_* bit, or NULL. */
const char *policy_permission_name(unsigned bit);

/* Return the permission bit a transport needs (0 for an unknown one). */
unsigned policy_transport_permission(enum policy_transport t);

/* Parse "http", "websocket", "tcp", "tls". Return the transport or
 * EGRESS_ERR_INVALID. */
int policy_transport_parse(const char *s);

/* Return the name of a transport, or "unknown". */
const char *policy_transport_name(enum policy_transport t);

/*
 * A parsed destination. scheme is "http", "https", "ws", "wss", or "" for
 * a HOST:PORT destination. port is explicit or the scheme's default.
 * path_off/path_len locate path and query ("/" when absent: path_len 0)
 * inside the string given to the parser.
 */
struct policy_dest {
	char scheme[8];
	struct policy_host host;
	uint16_t port;
	size_t path_off;
	size_t path_len;
};

/*
 * Parse an RFC 3986 absolute URI destination scheme://authority[/path]
 * [?query] (no fragment). Only http, https, ws and wss are accepted; any
 * userinfo (even empty), an empty port, a port with a sign or leading zero,
 * port 0 or > 65535, '\', whitespace or control bytes in the authority are
 * invalid. s holds len bytes (analysed up to POLICY_URL_MAX). Return 0 and
 * write *ret_dest, or EGRESS_ERR_INVALID.
 */
int policy_url_parse(const char *s, size_t len, struct policy_dest *ret_dest,
    struct policy_err *reterr);

/*
 * Parse a HOST:PORT destination (IPv6 in brackets) for the tcp and tls
 * transports. Same host and port rules as policy_url_parse().
 */
int policy_hostport_parse(const char *s, size_t len,
    struct policy_dest *ret_dest, struct policy_err *reterr);

/*
 * Parse a URL authority "host[:port]" (as a guest sends it in a request)
 * with default_port used when no port is given.
 */
int policy_authority_parse(const char *s, size_t len, uint16_t default_port,
    struct policy_dest *ret_dest, struct policy_err *reterr);

/*
 * Answer whether a name is local by nature: "localhost", "local",
 * "internal", "home.arpa" or any name under them. IP literals are not.
 */
int policy_host_is_local_name(const struct policy_host *host);

/*
 * Answer whether a name is loopback by nature (RFC 6761): "localhost" or
 * any name under it. IP literals are not (they are classified as
 * addresses). Return 1 or 0.
 */
int policy_host_is_loopback_name(const struct policy_host *host);

/* ---- Grant sets ------------------------------------------------------- */

/*
 * A set of entries with constant-time matching: exact hosts and suffixes
 * are hashed, and a request host is looked up once per candidate suffix
 * (at most 127 for a 253-byte name), independent of the number of entries.
 * Entries keep their insertion order for listing.
 */
struct policy_grant;

/* Return a new empty set, or NULL on out-of-memory. */
struct policy_grant *policy_grant_new(void);

/* Free the set. NULL is a no-op. */
void policy_grant_free(struct policy_grant *g);

/*
 * Add a copy of entry (produced by policy_entry_parse). A duplicate is
 * accepted once and ignored after. Return 0 or EGRESS_ERR_NOMEM.
 */
int policy_grant_add(struct policy_grant *g, const struct policy_entry *entry);

/* Return the number of distinct entries. NULL counts as empty. */
size_t policy_grant_count(const struct policy_grant *g);

/* Return entry i (insertion order), borrowed for the set's life, or NULL. */
const struct policy_entry *policy_grant_entry(const struct policy_grant *g,
    size_t i);

/*
 * Answer whether any entry matches host: an exact entry matches only an
 * equal host (IP literals: same family and bytes); "*.s" matches strict
 * subdomains of s and never s or an IP literal. A NULL or empty set
 * matches nothing. Return 1 or 0.
 */
/*@ requires host == \null || \valid_read(host);
    assigns \result \from g, host, *host;
    ensures \result == 0 || \result == 1;
 */
int policy_grant_matches(const struct policy_grant *g,
    const struct policy_host *host);

/*
 * Answer whether every host that entry matches is matched by g (an exact
 * entry: g matches it; "*.s": g holds "*.t" with s equal to t or under it).
 * Return 1 or 0.
 */
int policy_grant_covers(const struct policy_grant *g,
    const struct policy_entry *entry);

/* ---- Addresses -------------------------------------------------------- */

struct policy_addr {
	int family;	   /* 4 or 6 */
	uint8_t bytes[16]; /* network order; IPv4 uses the first 4 */
};

/* Class bits. A non-NAT64 address has exactly one. */
#define POLICY_CLASS_PUBLIC   (1u << 0)
#define POLICY_CLASS_PRIVATE  (1u << 1)
#define POLICY_CLASS_RESERVED (1u << 2)
#define POLICY_CLASS_METADATA (1u << 3)
/* 127.0.0.0/8, ::1 and every address this host delivers locally
 * (policy_classify_ctx). */
#define POLICY_CLASS_LOOPBACK (1u << 4)

struct policy_nat64_prefix {
	uint8_t prefix[16];
	unsigned len; /* 32, 40, 48, 56, 64 or 96 */
};

struct policy_nat64_list {
	size_t n;
	struct policy_nat64_prefix v[POLICY_NAT64_MAX];
};

/*
 * Parse the items of [security] nat64_prefixes: each "<ipv6>/<len>" with
 * len in {32,40,48,56,64,96} and no bits set beyond the prefix, canonical
 * inet_ntop spelling. One bad item rejects the whole list; reterr names
 * every bad item ("item 2 '...': ..."). Return 0 and write *ret_list, or
 * EGRESS_ERR_INVALID (or EGRESS_ERR_TOO_BIG over POLICY_NAT64_MAX).
 */
int policy_nat64_parse_list(const char *const *items, size_t n,
    struct policy_nat64_list *ret_list, struct policy_err *reterr);

/*
 * A prefix: addr with len leading bits (0 to 32 for IPv4, 0 to 128 for
 * IPv6); the bits beyond len are zero.
 */
struct policy_net {
	struct policy_addr addr;
	unsigned len;
};

/*
 * Order nets by family, then length, then bytes (qsort()-compatible; both
 * arguments point to struct policy_net). The order policy_classify_ctx
 * wants for nets.
 */
int policy_net_cmp(const void *a, const void *b);

/*
 * Inputs to classification; all borrowed. local lists this host's own
 * interface addresses and nets the prefixes it delivers locally (its local
 * routes), sorted by policy_net_cmp() without duplicates; an address in
 * either is in the loopback class. A net of a length beyond its family's
 * is ignored; unsorted nets may be missed. Any may be empty/NULL.
 */
struct policy_classify_ctx {
	const struct policy_nat64_list *nat64;
	const struct policy_addr *local;
	size_t nlocal;
	const struct policy_net *nets;
	size_t nnets;
};

/*
 * Classify one address. Returns a mask of POLICY_CLASS_* bits: one bit,
 * except for a NAT64 address (well-known 64:ff9b::/96 or any declared
 * prefix), which has the union of the classes of every IPv4 address it
 * decodes to. IPv4-mapped addresses are classified as their IPv4 address.
 */
unsigned policy_addr_classify(const struct policy_classify_ctx *ctx,
    const struct policy_addr *addr);

/* Format an address (inet_ntop spelling) into buf. Return 0 or
 * EGRESS_ERR_TOO_BIG. */
int policy_addr_format(const struct policy_addr *addr, char *buf, size_t n);

/* Parse a canonical IPv4 or IPv6 literal (no brackets). Return 0 or
 * EGRESS_ERR_INVALID. */
int policy_addr_parse(const char *s, struct policy_addr *ret_addr);

/* ---- Verdict ---------------------------------------------------------- */

/* Stable reason codes; POLICY_REASON_ALLOW is the only allowing one. */
enum policy_reason {
	POLICY_REASON_ALLOW = 0,
	POLICY_REASON_INVALID_DESTINATION = 1,
	POLICY_REASON_UNKNOWN_INSTANCE = 2,
	POLICY_REASON_MANIFEST_REFUSED = 3,
	POLICY_REASON_NO_PERMISSION = 4,
	POLICY_REASON_NOT_GRANTED = 5,
	POLICY_REASON_NOT_DECLARED = 6,
	POLICY_REASON_PRIVATE_ADDRESS = 7,
	POLICY_REASON_UNRESOLVABLE = 8,
	POLICY_REASON_METADATA = 9,
	POLICY_REASON_RESERVED_ADDRESS = 10,
	POLICY_REASON_MIXED_ZONES = 11,
	POLICY_REASON_LOOPBACK_ADDRESS = 12,
};

/* Return the stable string of a reason ("allow", "not-granted", ...). */
const char *policy_reason_str(enum policy_reason r);

/*
 * One instance's policy, as conf/ builds it. Borrowed by the verdict.
 * manifest_ok is 0 when the manifest was refused (then nothing else is
 * consulted). permissions is the effective set: requested by the manifest
 * and granted by the entry. declared is the manifest's [egress] hosts;
 * operator_defined makes the grant alone govern. allow_private re-opens
 * the private class for the hosts it matches, allow_loopback the loopback
 * class (loopback and this host's own addresses); neither re-opens the
 * other's class, and both only relax a host that hosts already grants.
 */
struct policy_instance {
	const char *name;
	int manifest_ok;
	unsigned permissions;
	const struct policy_grant *hosts;
	const struct policy_grant *allow_private;
	const struct policy_grant *declared;
	int operator_defined;
	const struct policy_grant *allow_loopback; /* NULL: none */
};

struct policy_verdict {
	enum policy_reason reason;
	int need_resolve; /* set by policy_check_destination on allow */
	size_t naddrs;	  /* validated addresses, on final allow */
	struct policy_addr addrs[POLICY_ANSWERS_MAX];
};

/*
 * Steps 2 to 6 of the verdict, before resolution. inst NULL means no entry
 * (unknown-instance). On a deny, ret->reason says why. On allow, reason is
 * POLICY_REASON_ALLOW and need_resolve says whether the host is a name
 * (an IP-literal host is its own answer and the caller passes it to
 * policy_check_answers). Return 0, or EGRESS_ERR_INVALID on bad arguments.
 */
int policy_check_destination(const struct policy_instance *inst,
    enum policy_transport transport, const struct policy_dest *dest,
    struct policy_verdict *ret);

/*
 * Steps 7 and 8: classify every answer (at most POLICY_ANSWERS_MAX are
 * considered; more is EGRESS_ERR_TOO_BIG) and decide. On allow, ret->addrs
 * holds the answers deduplicated in resolver order. Call only after
 * policy_check_destination allowed. Return 0 or a negative error.
 */
int policy_check_answers(const struct policy_instance *inst,
    const struct policy_dest *dest, const struct policy_addr *answers,
    size_t n, const struct policy_classify_ctx *ctx,
    struct policy_verdict *ret);

#endif /* EGRESS_POLICY_H */
