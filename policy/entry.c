/* SPDX-License-Identifier: ISC */
/*
 * The entry grammar shared by egress_hosts, egress_allow_private and a
 * manifest's [egress] hosts: an exact host (name, canonical dotted quad or
 * canonical IPv6, bare or bracketed) or one leading "*." over a name of two
 * labels or more that is not a public suffix. Entries must already be
 * canonical; a spelling that only differs by case, surrounding whitespace,
 * leading or trailing dots or numeric form is refused with the spelling to
 * write, never folded. Also the permission and transport names.
 */
#include <stdio.h>
#include <string.h>

#include "policy/chars.h"
#include "policy/inet.h"
#include "policy/policy.h"

/* Longest entry text worth looking at: "*." and a 253-byte name. */
#define ENTRY_TEXT_MAX (POLICY_NAME_MAX + 2)

static int
entry_fail(struct policy_err *reterr, const char *msg)
{
	if (reterr != NULL)
		(void)snprintf(reterr->msg, sizeof(reterr->msg), "%s", msg);
	return EGRESS_ERR_INVALID;
}

/* Fail with "...: write 'canon'", or without the spelling if it is cut. */
static int
entry_fail_write(struct policy_err *reterr, const char *why, const char *canon)
{
	int r;

	if (reterr == NULL)
		return EGRESS_ERR_INVALID;
	r = snprintf(reterr->msg, sizeof(reterr->msg), "%s: write '%s'", why,
	    canon);
	if (r < 0 || (size_t)r >= sizeof(reterr->msg))
		(void)snprintf(reterr->msg, sizeof(reterr->msg),
		    "%s: write it in lowercase, without surrounding "
		    "whitespace or dots",
		    why);
	return EGRESS_ERR_INVALID;
}

static int
is_space(int c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
	    c == '\f';
}

/* Return the index where the last label of s[0..len) starts. */
static size_t
last_label_start(const char *s, size_t len)
{
	size_t i = len;

	while (i > 0 && s[i - 1] != '.')
		i--;
	return i;
}

/* Return the index of the first byte c in s[from..to), or to. */
static size_t
span_find(const char *s, size_t from, size_t to, char c)
{
	size_t i;

	for (i = from; i < to && s[i] != c; i++)
		;
	return i;
}

/* Parse an IPv6 text exactly as written (no brackets) into e. */
static int
entry_v6(const char *c, size_t n, struct policy_entry *e,
    struct policy_err *reterr)
{
	/* canon keeps a zero byte after the longest text formatted into it. */
	char canon[POLICY_INET6_TEXT + 1] = { 0 };
	uint8_t addr[16];
	struct policy_host h;
	int r;

	if (n >= POLICY_INET6_TEXT)
		return entry_fail(reterr, "invalid IPv6 address");
	if (policy_inet6_parse(c, n, addr) != 1)
		return entry_fail(reterr, "invalid IPv6 address");
	r = policy_inet6_format(addr, canon, POLICY_INET6_TEXT);
	if (r < 0)
		return entry_fail(reterr, "invalid IPv6 address");
	if ((size_t)r != n || memcmp(canon, c, n) != 0)
		return entry_fail_write(reterr,
		    "IPv6 entries must be in canonical form", canon);
	/* The host policy_host_parse() makes of "[canon]": canon is already
	 * its lowercase spelling, and addr what it parses to. */
	memset(&h, 0, sizeof(h));
	h.kind = POLICY_HOST_IPV6;
	memcpy(h.name, canon, n);
	memcpy(h.addr, addr, sizeof(h.addr));
	e->kind = POLICY_ENTRY_EXACT;
	e->host = h;
	return 0;
}

/*
 * Parse c (n bytes) as an entry that must already be canonical. Writes
 * reterr with the most useful message on failure.
 */
static int
entry_strict(const char *c, size_t n, policy_psl_fn psl, void *psl_ctx,
    struct policy_entry *ret_entry, struct policy_err *reterr)
{
	struct policy_entry e;
	struct policy_host h;
	size_t pn, k;

	memset(&e, 0, sizeof(e));
	memset(&h, 0, sizeof(h)); /* its name ends in a NUL whatever happens */
	if (n == 1 && c[0] == '*')
		return entry_fail(reterr,
		    "a bare '*' is not allowed: there is "
		    "no allow-all entry");
	if (c[0] == '*') {
		if (n < 2 || c[1] != '.' || memchr(c + 1, '*', n - 1) != NULL)
			return entry_fail(reterr,
			    "a wildcard is written only "
			    "as one leading '*.' (as in '*.example.com')");
		c += 2;
		n -= 2;
		if (n == 0)
			return entry_fail(reterr,
			    "'*.' needs a suffix (as in "
			    "'*.example.com')");
		if (c[0] == '[' || memchr(c, ':', n) != NULL)
			return entry_fail(reterr,
			    "a wildcard cannot cover an IP literal");
		if (chars_label_is_numeric_at(c, last_label_start(c, n), n)) {
			if (policy_host_parse(c, n, &h, NULL) == 0 &&
			    h.kind == POLICY_HOST_IPV4)
				return entry_fail(reterr,
				    "a wildcard cannot cover an IP literal");
			return entry_fail(reterr,
			    "a suffix pattern whose last "
			    "label is numeric can never match a request host");
		}
		if (policy_host_parse(c, n, &h, reterr) != 0)
			return EGRESS_ERR_INVALID;
		if (h.kind != POLICY_HOST_NAME || strlen(h.name) != n ||
		    memcmp(h.name, c, n) != 0)
			return entry_fail(reterr, "entries must be canonical");
		if (strchr(h.name, '.') == NULL)
			return entry_fail(reterr,
			    "a wildcard over a single "
			    "label (as in '*.com') is too broad");
		/* "a." and the suffix must still fit in a name. */
		if (n > POLICY_NAME_MAX - 2)
			return entry_fail(reterr,
			    "a suffix longer than 251 "
			    "bytes has no subdomain a request could name");
		/* Any answer but a clear "no" counts as public: fail closed. */
		if (psl(psl_ctx, h.name) != 0) {
			if (reterr != NULL)
				(void)snprintf(reterr->msg,
				    sizeof(reterr->msg),
				    "'%.64s' is a public "
				    "suffix: a wildcard over it would grant "
				    "every domain registered under it",
				    h.name);
			return EGRESS_ERR_INVALID;
		}
		e.kind = POLICY_ENTRY_SUFFIX;
		e.host = h;
		*ret_entry = e;
		return 0;
	}
	if (memchr(c, '*', n) != NULL)
		return entry_fail(reterr,
		    "a '*' is allowed only as one "
		    "leading '*.' (as in '*.example.com')");
	if (c[0] == '[') {
		k = span_find(c, 1, n, ']'); /* c[0] is the '[' */
		if (k >= n)
			return entry_fail(reterr, "unbalanced '[' in entry");
		pn = k - 1;
		if (k + 1 != n) {
			char inner[POLICY_INET6_TEXT + 1] = { 0 };

			if (c[k + 1] == ':' && pn < POLICY_INET6_TEXT) {
				memcpy(inner, c + 1, pn);
				inner[pn] = '\0';
				return entry_fail_write(reterr,
				    "a port is not "
				    "part of an entry (granting a host grants "
				    "every port)",
				    inner);
			}
			return entry_fail(reterr,
			    "unexpected text after ']' in entry");
		}
		if (memchr(c + 1, ':', pn) == NULL) {
			if (pn > 0 &&
			    policy_host_parse(c + 1, pn, &h, NULL) == 0 &&
			    h.kind != POLICY_HOST_IPV6 &&
			    strlen(h.name) == pn &&
			    memcmp(h.name, c + 1, pn) == 0)
				return entry_fail_write(reterr,
				    "brackets are "
				    "only for IPv6 literals",
				    h.name);
			return entry_fail(reterr,
			    "brackets are only for IPv6 literals");
		}
		if (entry_v6(c + 1, pn, &e, reterr) != 0)
			return EGRESS_ERR_INVALID;
		*ret_entry = e;
		return 0;
	}
	if ((k = span_find(c, 0, n, ':')) < n) {
		size_t hn = k, i;
		int portish = span_find(c, hn + 1, n, ':') >= n;

		for (i = hn + 1; portish && i < n; i++)
			if (!chars_is_digit((unsigned char)c[i]))
				portish = 0;
		if (portish) {
			char host[POLICY_NAME_MAX + 1] = { 0 };

			if (hn > 0 && hn <= POLICY_NAME_MAX &&
			    policy_host_parse(c, hn, &h, NULL) == 0 &&
			    strlen(h.name) == hn &&
			    memcmp(h.name, c, hn) == 0) {
				memcpy(host, c, hn);
				host[hn] = '\0';
				return entry_fail_write(reterr,
				    "a port is not "
				    "part of an entry (granting a host grants "
				    "every port)",
				    host);
			}
			return entry_fail(reterr,
			    "a port is not part of an entry");
		}
		if (entry_v6(c, n, &e, reterr) != 0)
			return EGRESS_ERR_INVALID;
		*ret_entry = e;
		return 0;
	}
	if (policy_host_parse(c, n, &h, reterr) != 0)
		return EGRESS_ERR_INVALID;
	if (strlen(h.name) != n || memcmp(h.name, c, n) != 0)
		return entry_fail_write(reterr, "entries must be canonical",
		    h.name);
	e.kind = POLICY_ENTRY_EXACT;
	e.host = h;
	*ret_entry = e;
	return 0;
}

int
policy_entry_parse(const char *s, size_t len, policy_psl_fn psl, void *psl_ctx,
    struct policy_entry *ret_entry, struct policy_err *reterr)
{
	char cand[ENTRY_TEXT_MAX + 1] = { 0 };
	struct policy_entry e;
	struct policy_err sub;
	size_t a, b, i, k, n;

	if (psl == NULL)
		return entry_fail(reterr,
		    "no public-suffix check supplied: "
		    "entries cannot be validated");
	if (s == NULL || ret_entry == NULL)
		return entry_fail(reterr, "no entry");
	if (len == 0)
		return entry_fail(reterr, "empty entry");

	/* Refuse what no normalisation could make an entry. */
	for (i = 0; i < len; i++) {
		int c = (unsigned char)s[i];

		if (c == '/' || c == '@' || c == '?' || c == '#' ||
		    c == '\\') {
			struct policy_dest d;

			if (policy_url_parse(s, len, &d, NULL) == 0)
				return entry_fail_write(reterr,
				    "an entry is a "
				    "host or '*.suffix', not a URL",
				    d.host.name);
			return entry_fail(reterr,
			    "an entry is a host or "
			    "'*.suffix', not a URL, path, userinfo, query or "
			    "fragment ('/', '@', '?', '#' and '\\' are not "
			    "allowed)");
		}
		if (c == '%')
			return entry_fail(reterr,
			    memchr(s, ':', len) != NULL ?
				"an IPv6 zone id is not allowed in an entry" :
				"percent-escapes are not allowed in an entry");
		if (c >= 0x80)
			return entry_fail(reterr,
			    "non-ASCII entry: write the "
			    "A-label (punycode, as 'idn2' prints it)");
		if ((c < 0x20 && !is_space(c)) || c == 0x7f)
			return entry_fail(reterr,
			    "control character in entry");
	}

	/* The spelling to suggest: trimmed, lowercase, no outer dots. */
	for (a = 0; a < len && is_space((unsigned char)s[a]); a++)
		;
	for (b = len; b > a && is_space((unsigned char)s[b - 1]); b--)
		;
	for (i = a; i < b; i++)
		if (is_space((unsigned char)s[i]))
			return entry_fail(reterr,
			    "whitespace inside an entry");
	/* Indices are compared with <, never ==, so that their bounds
	 * follow from the comparison (docs/reliability.md). */
	if (b <= a)
		return entry_fail(reterr, "empty entry");
	if (s[a] != '*' && s[a] != '[' && span_find(s, a, b, ':') >= b)
		while (a < b && s[a] == '.')
			a++;
	/* Keep "*." whole so that it is named as the error it is. */
	if (s[b - 1] != ']')
		while (b > a && s[b - 1] == '.' &&
		    !(b >= a + 2 && s[b - 2] == '*'))
			b--;
	if (b <= a)
		return entry_fail(reterr, "empty entry");
	n = b - a;
	if (n > ENTRY_TEXT_MAX)
		return entry_fail(reterr, "entry longer than 253 bytes");
	/* k < ENTRY_TEXT_MAX always holds here (n is at most that). */
	for (i = a, k = 0; i < b && k < ENTRY_TEXT_MAX; i++, k++) {
		int c = (unsigned char)s[i];

		cand[k] = (char)(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
	}
	cand[k] = '\0';

	memset(&e, 0, sizeof(e));
	if (entry_strict(cand, n, psl, psl_ctx, &e, &sub) != 0) {
		if (reterr != NULL)
			*reterr = sub;
		return EGRESS_ERR_INVALID;
	}
	if (n != len || memcmp(cand, s, len) != 0) {
		char canon[ENTRY_TEXT_MAX + 1] = { 0 };

		if (policy_entry_format(&e, canon, sizeof(canon)) < 0)
			return entry_fail(reterr, "entry is not canonical");
		return entry_fail_write(reterr,
		    "entries must be canonical "
		    "(lowercase, no whitespace, no leading or trailing dot)",
		    canon);
	}
	*ret_entry = e;
	return 0;
}

int
policy_entry_format(const struct policy_entry *entry, char *buf, size_t n)
{
	const char *pre;
	size_t plen, len, i, k;

	if (entry == NULL || buf == NULL)
		return EGRESS_ERR_INVALID;
	switch (entry->kind) {
	case POLICY_ENTRY_EXACT:
		pre = "";
		plen = 0;
		break;
	case POLICY_ENTRY_SUFFIX:
		pre = "*.";
		plen = 2;
		break;
	default:
		return EGRESS_ERR_INVALID;
	}
	len = strnlen(entry->host.name, sizeof(entry->host.name));
	if (len >= sizeof(entry->host.name))
		return EGRESS_ERR_INVALID;
	/* As snprintf(): what fits, cut and NUL-terminated, each byte
	 * written at an index checked against n. */
	k = 0;
	for (i = 0; i < plen && k + 1 < n; i++)
		buf[k++] = pre[i];
	for (i = 0; i < len && k + 1 < n; i++)
		buf[k++] = entry->host.name[i];
	if (k < n)
		buf[k] = '\0';
	if (plen + len >= n)
		return EGRESS_ERR_TOO_BIG;
	return (int)(plen + len);
}

/* ---- Permissions and transports -------------------------------------- */

static const struct {
	unsigned bit;
	const char *name;
} permissions[] = {
	{ POLICY_PERM_HTTP_CLIENT, "http_client" },
	{ POLICY_PERM_WEBSOCKET_CLIENT, "websocket_client" },
	{ POLICY_PERM_SOCKET_CLIENT, "socket_client" },
};

static const struct {
	enum policy_transport t;
	const char *name;
	unsigned perm;
} transports[] = {
	{ POLICY_TRANSPORT_HTTP, "http", POLICY_PERM_HTTP_CLIENT },
	{ POLICY_TRANSPORT_WEBSOCKET, "websocket",
	    POLICY_PERM_WEBSOCKET_CLIENT },
	{ POLICY_TRANSPORT_TCP, "tcp", POLICY_PERM_SOCKET_CLIENT },
	{ POLICY_TRANSPORT_TLS, "tls", POLICY_PERM_SOCKET_CLIENT },
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

int
policy_permission_parse(const char *s, size_t len)
{
	size_t i;

	if (s == NULL)
		return EGRESS_ERR_INVALID;
	for (i = 0; i < NELEM(permissions); i++)
		if (strlen(permissions[i].name) == len &&
		    memcmp(permissions[i].name, s, len) == 0)
			return (int)permissions[i].bit;
	return EGRESS_ERR_INVALID;
}

const char *
policy_permission_name(unsigned bit)
{
	size_t i;

	for (i = 0; i < NELEM(permissions); i++)
		if (permissions[i].bit == bit)
			return permissions[i].name;
	return NULL;
}

unsigned
policy_transport_permission(enum policy_transport t)
{
	size_t i;

	for (i = 0; i < NELEM(transports); i++)
		if (transports[i].t == t)
			return transports[i].perm;
	return 0;
}

int
policy_transport_parse(const char *s)
{
	size_t i;

	if (s == NULL)
		return EGRESS_ERR_INVALID;
	for (i = 0; i < NELEM(transports); i++)
		if (strcmp(transports[i].name, s) == 0)
			return (int)transports[i].t;
	return EGRESS_ERR_INVALID;
}

const char *
policy_transport_name(enum policy_transport t)
{
	size_t i;

	for (i = 0; i < NELEM(transports); i++)
		if (transports[i].t == t)
			return transports[i].name;
	return "unknown";
}
