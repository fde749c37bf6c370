/* SPDX-License-Identifier: ISC */
/*
 * URL splitting and RFC 3986 reference resolution for egress-fetch -L.
 * Components are found as in RFC 3986 appendix B (scheme, authority,
 * path, query, fragment, each with a "defined" flag), resolved with the
 * algorithm of section 5.2.2 and section 5.2.4's remove_dot_segments, and
 * recomposed per section 5.3 without the fragment.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <egress/error.h>

#include "shim/url.h"

/* A view of one component. */
struct part {
	const char *p;
	size_t n;
	int set;
};

struct parts {
	struct part scheme, auth, path, query;
};

static int
bad_bytes(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s <= 0x20 || (unsigned char)*s == 0x7f)
			return 1;
	return 0;
}

/* RFC 3986 appendix B: ^(([^:/?#]+):)?(//([^/?#]*))?([^?#]*)(\?([^#]*))? */
static void
split(const char *s, struct parts *ps)
{
	const char *p = s, *q;

	memset(ps, 0, sizeof(*ps));
	q = p + strcspn(p, ":/?#");
	if (*q == ':' && q > p) {
		ps->scheme = (struct part){ p, (size_t)(q - p), 1 };
		p = q + 1;
	}
	if (p[0] == '/' && p[1] == '/') {
		p += 2;
		q = p + strcspn(p, "/?#");
		ps->auth = (struct part){ p, (size_t)(q - p), 1 };
		p = q;
	}
	q = p + strcspn(p, "?#");
	ps->path = (struct part){ p, (size_t)(q - p), 1 };
	p = q;
	if (*p == '?') {
		p++;
		q = p + strcspn(p, "#");
		ps->query = (struct part){ p, (size_t)(q - p), 1 };
	}
}

static int
scheme_ok(const struct part *s)
{
	size_t i;

	if (!s->set || s->n == 0 || !isalpha((unsigned char)s->p[0]))
		return 0;
	for (i = 1; i < s->n; i++)
		if (!isalnum((unsigned char)s->p[i]) && s->p[i] != '+' &&
		    s->p[i] != '-' && s->p[i] != '.')
			return 0;
	return 1;
}

/* A growing string bounded by URL_MAX. */
struct str {
	char *p;
	size_t n;
	int err;
};

static void
put(struct str *b, const char *p, size_t n)
{
	if (b->err != 0)
		return;
	if (b->n + n > URL_MAX) {
		b->err = EGRESS_ERR_TOO_BIG;
		return;
	}
	if (n > 0) /* an unset part may have no bytes at all */
		memcpy(b->p + b->n, p, n);
	b->n += n;
	b->p[b->n] = '\0';
}

/*
 * RFC 3986 5.2.4 remove_dot_segments on in[0..n), appended to out. The
 * output is never longer than the input.
 */
static void
remove_dots(struct str *out, const char *in, size_t n)
{
	size_t start = out->n, i = 0, seg;
	char *last;

	while (i < n && out->err == 0) {
		const char *p = in + i;
		size_t left = n - i;

		if (left >= 3 && memcmp(p, "../", 3) == 0)
			i += 3;
		else if (left >= 2 && memcmp(p, "./", 2) == 0)
			i += 2;
		else if (left >= 3 && memcmp(p, "/./", 3) == 0)
			i += 2;
		else if (left == 2 && memcmp(p, "/.", 2) == 0) {
			put(out, "/", 1);
			i += 2;
		} else if ((left >= 4 && memcmp(p, "/../", 4) == 0) ||
		    (left == 3 && memcmp(p, "/..", 3) == 0)) {
			/* Drop the last output segment. */
			out->p[out->n] = '\0';
			last = strrchr(out->p + start, '/');
			out->n = last != NULL ? (size_t)(last - out->p) :
						start;
			out->p[out->n] = '\0';
			if (left == 3)
				put(out, "/", 1);
			i += 3;
		} else if ((left == 1 && p[0] == '.') ||
		    (left == 2 && memcmp(p, "..", 2) == 0))
			i += left;
		else {
			seg = 1;
			if (p[0] != '/')
				seg = 0;
			while (seg < left && p[seg] != '/')
				seg++;
			put(out, p, seg);
			i += seg;
		}
	}
}

/* RFC 3986 5.2.3 merge, then remove_dot_segments, appended to out. */
static void
merge_path(struct str *out, const struct parts *base, const struct part *rp)
{
	char tmp[URL_MAX + 1];
	struct str t = { tmp, 0, 0 };
	const char *slash = NULL;
	size_t i;

	tmp[0] = '\0';
	if (base->auth.set && base->path.n == 0)
		put(&t, "/", 1);
	else {
		for (i = base->path.n; i > 0; i--)
			if (base->path.p[i - 1] == '/') {
				slash = base->path.p + i - 1;
				break;
			}
		if (slash != NULL)
			put(&t, base->path.p,
			    (size_t)(slash - base->path.p) + 1);
	}
	put(&t, rp->p, rp->n);
	if (t.err != 0) {
		out->err = t.err;
		return;
	}
	remove_dots(out, t.p, t.n);
}

int
url_resolve(const char *base, const char *ref, char **ret)
{
	struct parts b, r;
	struct part scheme, auth, query;
	struct str out = { NULL, 0, 0 };

	if (base == NULL || ref == NULL || ret == NULL)
		return EGRESS_ERR_INVALID;
	if (strlen(base) > URL_MAX || strlen(ref) > URL_MAX)
		return EGRESS_ERR_TOO_BIG;
	if (bad_bytes(base) || bad_bytes(ref))
		return EGRESS_ERR_INVALID;
	split(base, &b);
	split(ref, &r);
	if (!scheme_ok(&b.scheme))
		return EGRESS_ERR_INVALID;
	if (r.scheme.set && !scheme_ok(&r.scheme))
		return EGRESS_ERR_INVALID;
	out.p = malloc(URL_MAX + 1);
	if (out.p == NULL)
		return EGRESS_ERR_NOMEM;
	out.p[0] = '\0';

	if (r.scheme.set) {
		scheme = r.scheme;
		auth = r.auth;
		query = r.query;
	} else {
		scheme = b.scheme;
		if (r.auth.set) {
			auth = r.auth;
			query = r.query;
		} else {
			auth = b.auth;
			if (r.path.n == 0)
				query = r.query.set ? r.query : b.query;
			else
				query = r.query;
		}
	}
	put(&out, scheme.p, scheme.n);
	put(&out, ":", 1);
	if (auth.set) {
		put(&out, "//", 2);
		put(&out, auth.p, auth.n);
	}
	if (r.scheme.set || r.auth.set)
		remove_dots(&out, r.path.p, r.path.n);
	else if (r.path.n == 0)
		put(&out, b.path.p, b.path.n);
	else if (r.path.p[0] == '/')
		remove_dots(&out, r.path.p, r.path.n);
	else
		merge_path(&out, &b, &r.path);
	if (query.set) {
		put(&out, "?", 1);
		put(&out, query.p, query.n);
	}
	if (out.err != 0) {
		free(out.p);
		return out.err;
	}
	*ret = out.p;
	return 0;
}

int
url_parse(const char *s, struct url *ret)
{
	struct parts ps;
	struct url u = { NULL, NULL, NULL };
	size_t i, tn;

	if (s == NULL || ret == NULL)
		return EGRESS_ERR_INVALID;
	if (strlen(s) > URL_MAX)
		return EGRESS_ERR_TOO_BIG;
	if (bad_bytes(s))
		return EGRESS_ERR_INVALID;
	split(s, &ps);
	if (!scheme_ok(&ps.scheme) || !ps.auth.set || ps.auth.n == 0)
		return EGRESS_ERR_INVALID;
	// NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): scheme_ok() read it
	u.scheme = strndup(ps.scheme.p, ps.scheme.n);
	u.authority = strndup(ps.auth.p, ps.auth.n);
	tn = (ps.path.n > 0 ? ps.path.n : 1) +
	    (ps.query.set ? ps.query.n + 1 : 0);
	u.target = malloc(tn + 1);
	if (u.scheme == NULL || u.authority == NULL || u.target == NULL) {
		url_done(&u);
		return EGRESS_ERR_NOMEM;
	}
	for (i = 0; u.scheme[i] != '\0'; i++)
		u.scheme[i] = (char)tolower((unsigned char)u.scheme[i]);
	if (ps.path.n > 0)
		memcpy(u.target, ps.path.p, ps.path.n);
	else
		u.target[0] = '/';
	i = ps.path.n > 0 ? ps.path.n : 1;
	if (ps.query.set) {
		u.target[i++] = '?';
		memcpy(u.target + i, ps.query.p, ps.query.n);
		i += ps.query.n;
	}
	u.target[i] = '\0';
	*ret = u;
	return 0;
}

void
url_done(struct url *u)
{
	free(u->scheme);
	free(u->authority);
	free(u->target);
	u->scheme = u->authority = u->target = NULL;
}
