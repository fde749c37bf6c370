/* SPDX-License-Identifier: ISC */
/*
 * iniedit: the byte-preserving INI editor and the locked, atomic file
 * replacement behind every egressctl edit. Lines are classified with the
 * rules of Debian's inih 55 (start comments ';' '#', inline comments ';'
 * after whitespace, continuation = an indented non-comment line after a
 * key in the same section, '=' or ':' separators), so the editor and the
 * parser always agree on which lines belong to which key. See iniedit.h.
 */
#include <sys/file.h>
#include <sys/stat.h>

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <egress/error.h>

#include "broker/ctl/iniedit.h"

struct iniedit_line {
	char *s; /* the bytes, with the newline if any */
	size_t len;
};

struct iniedit {
	struct iniedit_line *v;
	size_t n;
	size_t cap;
	const char *nl; /* "\n" or "\r\n", from the first line */
};

enum line_kind {
	LK_BLANK = 1,
	LK_COMMENT,
	LK_SECTION,
	LK_KEY,
	LK_CONT,
	LK_OTHER,
};

/* What one line is, in inih's terms. Offsets are into the line. */
struct linfo {
	enum line_kind kind;
	size_t sec; /* index of the owning header line, or SIZE_MAX */
	size_t key; /* for KEY/CONT: index of the key line */
	size_t name_off, name_len; /* section or key name */
	size_t val_off, val_len;   /* key value (stripped) */
	size_t tail_off; /* after the value: inline comment, spaces */
	size_t body_len; /* the line without its newline */
};

static int
is_sp(int c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' ||
	    c == '\f';
}

/* inih's find_chars_or_comment over [s, s+len): the first byte in chars,
 * or a ';' preceded by whitespace (never at offset 0). */
static size_t
find_chars_or_comment(const char *s, size_t len, const char *chars)
{
	size_t i;
	int was_space = 0;

	for (i = 0; i < len; i++) {
		if (chars != NULL && strchr(chars, s[i]) != NULL)
			return i;
		if (was_space && s[i] == ';')
			return i;
		was_space = is_sp((unsigned char)s[i]);
	}
	return len;
}

/* Classify one line on its own; the caller resolves CONT vs KEY. */
static void
line_parse(const char *s, size_t len, int first, struct linfo *li)
{
	size_t b = 0, e, i, sep, ve;

	memset(li, 0, sizeof(*li));
	e = len;
	while (e > 0 && (s[e - 1] == '\n' || s[e - 1] == '\r'))
		e--;
	li->body_len = e;
	if (first && e >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0)
		b = 3;
	i = b;
	while (i < e && is_sp((unsigned char)s[i]))
		i++;
	while (e > i && is_sp((unsigned char)s[e - 1]))
		e--;
	if (i == e) {
		li->kind = LK_BLANK;
		return;
	}
	if (s[i] == ';' || s[i] == '#') {
		li->kind = LK_COMMENT;
		return;
	}
	/* Provisionally a key or a section; CONT is decided by the caller,
	 * which needs to know whether the line is indented. */
	li->name_off = i;
	if (i > b)
		li->tail_off = 1; /* marker: indented */
	if (s[i] == '[') {
		size_t j = i + 1 +
		    find_chars_or_comment(s + i + 1, e - i - 1, "]");

		if (j < e && s[j] == ']') {
			li->kind = LK_SECTION;
			li->name_off = i + 1;
			li->name_len = j - i - 1;
			return;
		}
		li->kind = LK_OTHER;
		return;
	}
	sep = i + find_chars_or_comment(s + i, e - i, "=:");
	if (sep >= e || (s[sep] != '=' && s[sep] != ':')) {
		li->kind = LK_OTHER;
		return;
	}
	li->kind = LK_KEY;
	ve = sep;
	while (ve > i && is_sp((unsigned char)s[ve - 1]))
		ve--;
	li->name_len = ve - i;
	i = sep + 1;
	while (i < e && is_sp((unsigned char)s[i]))
		i++;
	ve = i + find_chars_or_comment(s + i, e - i, NULL);
	while (ve > i && is_sp((unsigned char)s[ve - 1]))
		ve--;
	li->val_off = i;
	li->val_len = ve - i;
}

/* Classify every line with inih's state machine. info has d->n slots. */
static void
scan(const struct iniedit *d, struct linfo *info)
{
	size_t i, sec = SIZE_MAX, key = SIZE_MAX;

	for (i = 0; i < d->n; i++) {
		struct linfo *li = &info[i];
		int indented;

		line_parse(d->v[i].s, d->v[i].len, i == 0, li);
		indented = li->tail_off == 1;
		li->tail_off = 0;
		li->sec = sec;
		li->key = SIZE_MAX;
		if (li->kind == LK_BLANK || li->kind == LK_COMMENT)
			continue;
		if (key != SIZE_MAX && indented) {
			/* inih: a continuation, whatever it looks like. */
			size_t ve;

			li->kind = LK_CONT;
			li->key = key;
			li->val_off = li->name_off;
			ve = li->val_off +
			    find_chars_or_comment(d->v[i].s + li->val_off,
				li->body_len - li->val_off, NULL);
			while (ve > li->val_off &&
			    is_sp((unsigned char)d->v[i].s[ve - 1]))
				ve--;
			li->val_len = ve - li->val_off;
			li->tail_off = ve;
			continue;
		}
		if (li->kind == LK_SECTION) {
			sec = i;
			li->sec = i;
			key = SIZE_MAX;
			continue;
		}
		if (li->kind == LK_KEY) {
			key = i;
			li->key = i;
			li->tail_off = li->val_off + li->val_len;
		}
	}
}

static int
name_eq(const struct iniedit *d, const struct linfo *li, size_t i,
    const char *name)
{
	size_t n = strlen(name);

	return li->name_len == n &&
	    memcmp(d->v[i].s + li->name_off, name, n) == 0;
}

static struct linfo *
scan_new(const struct iniedit *d)
{
	struct linfo *info = calloc(d->n ? d->n : 1, sizeof(*info));

	if (info != NULL)
		scan(d, info);
	return info;
}

static int
lines_reserve(struct iniedit *d, size_t extra)
{
	struct iniedit_line *v;
	size_t cap;

	if (d->n + extra <= d->cap)
		return 0;
	cap = d->cap ? d->cap : 16;
	while (cap < d->n + extra)
		cap *= 2;
	v = reallocarray(d->v, cap, sizeof(*v));
	if (v == NULL)
		return EGRESS_ERR_NOMEM;
	d->v = v;
	d->cap = cap;
	return 0;
}

/* Insert a copy of s (len bytes) as line at. */
static int
line_insert(struct iniedit *d, size_t at, const char *s, size_t len)
{
	char *c;

	if (lines_reserve(d, 1) != 0 || (c = malloc(len + 1)) == NULL)
		return EGRESS_ERR_NOMEM;
	memcpy(c, s, len);
	c[len] = '\0';
	memmove(&d->v[at + 1], &d->v[at], (d->n - at) * sizeof(d->v[0]));
	d->v[at].s = c;
	d->v[at].len = len;
	d->n++;
	return 0;
}

static void
line_delete(struct iniedit *d, size_t at)
{
	free(d->v[at].s);
	memmove(&d->v[at], &d->v[at + 1], (d->n - at - 1) * sizeof(d->v[0]));
	d->n--;
}

/* Make sure the last line ends with a newline before appending. */
static int
ensure_final_newline(struct iniedit *d)
{
	struct iniedit_line *l;
	size_t nll = strlen(d->nl);
	char *s;

	if (d->n == 0)
		return 0;
	l = &d->v[d->n - 1];
	if (l->len > 0 && l->s[l->len - 1] == '\n')
		return 0;
	if ((s = realloc(l->s, l->len + nll + 1)) == NULL)
		return EGRESS_ERR_NOMEM;
	memcpy(s + l->len, d->nl, nll + 1);
	l->s = s;
	l->len += nll;
	return 0;
}

int
iniedit_parse(const char *buf, size_t len, struct iniedit **ret)
{
	struct iniedit *d;
	size_t off = 0;

	if (len > INIEDIT_FILE_MAX)
		return EGRESS_ERR_TOO_BIG;
	if ((d = calloc(1, sizeof(*d))) == NULL)
		return EGRESS_ERR_NOMEM;
	d->nl = "\n";
	while (off < len) {
		const char *p = memchr(buf + off, '\n', len - off);
		size_t l = p ? (size_t)(p - (buf + off)) + 1 : len - off;

		if (d->n == 0 && l >= 2 && buf[off + l - 1] == '\n' &&
		    buf[off + l - 2] == '\r')
			d->nl = "\r\n";
		if (line_insert(d, d->n, buf + off, l) != 0) {
			iniedit_free(d);
			return EGRESS_ERR_NOMEM;
		}
		off += l;
	}
	*ret = d;
	return 0;
}

void
iniedit_free(struct iniedit *d)
{
	size_t i;

	if (d == NULL)
		return;
	for (i = 0; i < d->n; i++)
		free(d->v[i].s);
	free(d->v);
	free(d);
}

int
iniedit_section_exists(const struct iniedit *d, const char *name)
{
	struct linfo *info = scan_new(d);
	size_t i;
	int found = 0;

	if (info == NULL)
		return 0;
	for (i = 0; i < d->n && !found; i++)
		if (info[i].kind == LK_SECTION &&
		    name_eq(d, &info[i], i, name))
			found = 1;
	free(info);
	return found;
}

int
iniedit_section_add(struct iniedit *d, const char *name)
{
	char line[INIEDIT_LINE_MAX + 8];
	int n, rc;

	if (name[0] == '\0' || strpbrk(name, "]\r\n;#") != NULL)
		return EGRESS_ERR_INVALID;
	if (iniedit_section_exists(d, name))
		return EGRESS_ERR_EXISTS;
	n = snprintf(line, sizeof(line), "[%s]%s", name, d->nl);
	if (n < 0 || (size_t)n > INIEDIT_LINE_MAX + strlen(d->nl))
		return EGRESS_ERR_TOO_BIG;
	if ((rc = ensure_final_newline(d)) != 0)
		return rc;
	if (d->n > 0) {
		struct linfo li;

		line_parse(d->v[d->n - 1].s, d->v[d->n - 1].len, d->n == 1,
		    &li);
		if (li.kind != LK_BLANK &&
		    (rc = line_insert(d, d->n, d->nl, strlen(d->nl))) != 0)
			return rc;
	}
	return line_insert(d, d->n, line, (size_t)n);
}

int
iniedit_section_remove(struct iniedit *d, const char *name)
{
	struct linfo *info;
	int found = 0;

	for (;;) {
		size_t i, h = SIZE_MAX, end, first, last;

		if ((info = scan_new(d)) == NULL)
			return EGRESS_ERR_NOMEM;
		for (i = 0; i < d->n; i++)
			if (info[i].kind == LK_SECTION &&
			    name_eq(d, &info[i], i, name)) {
				h = i;
				break;
			}
		if (h == SIZE_MAX) {
			free(info);
			break;
		}
		found = 1;
		for (end = h + 1; end < d->n && info[end].kind != LK_SECTION;
		     end++)
			;
		/* Trailing comments and blank lines belong to what follows. */
		last = end - 1;
		while (last > h &&
		    (info[last].kind == LK_BLANK ||
			info[last].kind == LK_COMMENT))
			last--;
		/* The comment block attached directly above the header. */
		first = h;
		while (first > 0 && info[first - 1].kind == LK_COMMENT)
			first--;
		free(info);
		for (i = first; i <= last; i++)
			line_delete(d, first);
		/* Do not leave two blank lines (or a trailing blank) behind. */
		if (first < d->n) {
			struct linfo a, b;

			line_parse(d->v[first].s, d->v[first].len, first == 0,
			    &b);
			if (first > 0)
				line_parse(d->v[first - 1].s,
				    d->v[first - 1].len, first - 1 == 0, &a);
			if (b.kind == LK_BLANK &&
			    (first == 0 || a.kind == LK_BLANK))
				line_delete(d, first);
		} else if (first > 0) {
			struct linfo a;

			line_parse(d->v[first - 1].s, d->v[first - 1].len,
			    first - 1 == 0, &a);
			if (a.kind == LK_BLANK)
				line_delete(d, first - 1);
		}
	}
	return found ? 0 : EGRESS_ERR_NOT_FOUND;
}

/* Find the section's header lines; write the first to *ret_h and the line
 * after the last key or continuation of the last occurrence (the place a
 * new key goes) to *ret_ins. */
static int
section_find(const struct iniedit *d, const struct linfo *info,
    const char *section, size_t *ret_h, size_t *ret_ins)
{
	size_t i, h = SIZE_MAX, ins = SIZE_MAX;

	for (i = 0; i < d->n; i++) {
		if (info[i].kind == LK_SECTION) {
			if (name_eq(d, &info[i], i, section)) {
				if (h == SIZE_MAX)
					h = i;
				ins = i + 1;
			}
			continue;
		}
		if (ins != SIZE_MAX && info[i].sec != SIZE_MAX &&
		    name_eq(d, &info[info[i].sec], info[i].sec, section) &&
		    (info[i].kind == LK_KEY || info[i].kind == LK_CONT ||
			info[i].kind == LK_OTHER))
			ins = i + 1;
	}
	if (h == SIZE_MAX)
		return EGRESS_ERR_NOT_FOUND;
	*ret_h = h;
	*ret_ins = ins;
	return 0;
}

/* A growing string. */
struct sbuf {
	char *s;
	size_t len, cap;
	int oom;
};

static void
sb_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	/* No configuration comes near this; it also bounds the doubling. */
	if (n > SIZE_MAX / 4 || b->len > SIZE_MAX / 4) {
		b->oom = 1;
		return;
	}
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 128;
		char *p;

		while (cap < b->len + n + 1)
			cap *= 2;
		if ((p = realloc(b->s, cap)) == NULL) {
			b->oom = 1;
			return;
		}
		b->s = p;
		b->cap = cap;
	}
	if (n > 0)
		memcpy(b->s + b->len, s, n);
	b->len += n;
	b->s[b->len] = '\0';
}

static void
sb_str(struct sbuf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

/*
 * Replace the key's value lines with the rendered lines (text holds one or
 * more lines, each ending in d->nl). Every occurrence of key in section is
 * found; the first one's key line is replaced by text and the continuation
 * lines of all of them and the key lines of the later ones are removed.
 * Without an occurrence, text goes after the section's last key.
 */
static int
key_replace(struct iniedit *d, const char *section, const char *key,
    const char *(*render)(const struct iniedit *, const char *prefix,
	size_t prefixlen, const char *tail, size_t taillen, void *arg,
	int *reterr),
    void *arg)
{
	struct linfo *info;
	size_t i, h, ins, first = SIZE_MAX;
	const char *text;
	char *prefix = NULL, *tail = NULL;
	size_t prefixlen, taillen = 0;
	int rc, err = 0;

	if ((info = scan_new(d)) == NULL)
		return EGRESS_ERR_NOMEM;
	if ((rc = section_find(d, info, section, &h, &ins)) != 0)
		goto out;
	for (i = 0; i < d->n; i++)
		if (info[i].kind == LK_KEY && info[i].sec != SIZE_MAX &&
		    name_eq(d, &info[info[i].sec], info[i].sec, section) &&
		    name_eq(d, &info[i], i, key)) {
			first = i;
			break;
		}
	if (first == SIZE_MAX) {
		size_t kl = strlen(key);

		if ((prefix = malloc(kl + 4)) == NULL) {
			rc = EGRESS_ERR_NOMEM;
			goto out;
		}
		prefixlen = (size_t)snprintf(prefix, kl + 4, "%s = ", key);
	} else {
		const struct linfo *li = &info[first];
		const char *s = d->v[first].s;

		prefixlen = li->val_off;
		if ((prefix = strndup(s, prefixlen)) == NULL) {
			rc = EGRESS_ERR_NOMEM;
			goto out;
		}
		taillen = li->body_len - li->tail_off;
		if ((tail = strndup(s + li->tail_off, taillen)) == NULL) {
			rc = EGRESS_ERR_NOMEM;
			goto out;
		}
	}
	text = render(d, prefix, prefixlen, tail, taillen, arg, &err);
	if (text == NULL) {
		rc = err ? err : EGRESS_ERR_NOMEM;
		goto out;
	}
	if (first == SIZE_MAX) {
		if (ins == d->n)
			rc = ensure_final_newline(d);
		if (rc == 0)
			rc = line_insert(d, ins, text, strlen(text));
		free((char *)text);
		goto out;
	}
	/* Delete, from the end, every line of every occurrence but keep the
	 * comments and blanks inside their spans; an inline comment on a
	 * removed line stays, on its own line where that line was. */
	for (i = d->n; i-- > first;) {
		const struct linfo *li = &info[i];
		size_t t;

		if (!((li->kind == LK_KEY || li->kind == LK_CONT) &&
			li->key != SIZE_MAX && info[li->key].sec != SIZE_MAX &&
			name_eq(d, &info[info[li->key].sec], info[li->key].sec,
			    section) &&
			name_eq(d, &info[li->key], li->key, key)))
			continue;
		t = li->tail_off;
		while (t < li->body_len && is_sp((unsigned char)d->v[i].s[t]))
			t++;
		if (i != first && t < li->body_len) {
			struct sbuf c = { 0 };

			sb_add(&c, d->v[i].s + t, li->body_len - t);
			sb_str(&c, d->nl);
			line_delete(d, i);
			if (c.oom || line_insert(d, i, c.s, c.len) != 0) {
				free(c.s);
				free((char *)text);
				rc = EGRESS_ERR_NOMEM;
				goto out;
			}
			free(c.s);
		} else
			line_delete(d, i);
	}
	rc = line_insert(d, first, text, strlen(text));
	free((char *)text);
out:
	free(prefix);
	free(tail);
	free(info);
	return rc;
}

/* The prefix without trailing blanks ("key =" for an empty value). */
static size_t
prefix_trim(const char *prefix, size_t len)
{
	while (len > 0 && (prefix[len - 1] == ' ' || prefix[len - 1] == '\t'))
		len--;
	return len;
}

/*
 * An empty value cannot keep an inline comment on its line: inih would
 * read "key = ; c" as the value "; c". The comment moves to its own line
 * above the key.
 */
static void
empty_with_comment(struct sbuf *b, const struct iniedit *d, const char *prefix,
    size_t prefixlen, const char *tail, size_t taillen)
{
	size_t i = 0;

	while (i < taillen && is_sp((unsigned char)tail[i]))
		i++;
	if (i < taillen) {
		sb_add(b, tail + i, taillen - i);
		sb_str(b, d->nl);
	}
	sb_add(b, prefix, prefix_trim(prefix, prefixlen));
	sb_str(b, d->nl);
}

static const char *
render_scalar(const struct iniedit *d, const char *prefix, size_t prefixlen,
    const char *tail, size_t taillen, void *arg, int *reterr)
{
	const char *value = arg;
	struct sbuf b = { 0 };

	if (value[0] == '\0') {
		empty_with_comment(&b, d, prefix, prefixlen, tail, taillen);
		goto done;
	}
	sb_add(&b, prefix, prefixlen);
	sb_str(&b, value);
	if (taillen > 0)
		sb_add(&b, tail, taillen);
	if (!b.oom && b.len > INIEDIT_LINE_MAX) {
		free(b.s);
		*reterr = EGRESS_ERR_TOO_BIG;
		return NULL;
	}
	sb_str(&b, d->nl);
done:
	if (b.oom) {
		free(b.s);
		return NULL;
	}
	return b.s;
}

int
iniedit_set(struct iniedit *d, const char *section, const char *key,
    const char *value)
{
	if (strpbrk(value, "\r\n") != NULL ||
	    strpbrk(key, "\r\n=:;#[") != NULL || key[0] == '\0')
		return EGRESS_ERR_INVALID;
	return key_replace(d, section, key, render_scalar, (void *)value);
}

struct list_arg {
	const char *const *items;
	size_t n;
};

static const char *
render_list(const struct iniedit *d, const char *prefix, size_t prefixlen,
    const char *tail, size_t taillen, void *arg, int *reterr)
{
	const struct list_arg *la = arg;
	struct sbuf b = { 0 };
	size_t i, one = prefixlen + taillen, indent;

	for (i = 0; i < la->n; i++)
		one += strlen(la->items[i]) + (i ? 2 : 0);
	if (la->n == 0) {
		empty_with_comment(&b, d, prefix, prefixlen, tail, taillen);
		goto out;
	}
	if (one <= INIEDIT_WRAP) {
		sb_add(&b, prefix, prefixlen);
		for (i = 0; i < la->n; i++) {
			if (i)
				sb_str(&b, ", ");
			sb_str(&b, la->items[i]);
		}
		sb_add(&b, tail, taillen);
		sb_str(&b, d->nl);
		goto out;
	}
	/* One item a line, aligned under the first value when it fits. */
	indent = prefixlen;
	for (i = 0; i < la->n; i++)
		if (indent + strlen(la->items[i]) > INIEDIT_LINE_MAX)
			indent = 1;
	for (i = 0; i < la->n; i++)
		if (1 + strlen(la->items[i]) > INIEDIT_LINE_MAX) {
			*reterr = EGRESS_ERR_TOO_BIG;
			return NULL;
		}
	if (prefixlen + strlen(la->items[0]) + taillen <= INIEDIT_LINE_MAX) {
		sb_add(&b, prefix, prefixlen);
		sb_str(&b, la->items[0]);
		sb_add(&b, tail, taillen);
		sb_str(&b, d->nl);
		i = 1;
	} else {
		size_t pl = prefix_trim(prefix, prefixlen);

		if (pl + taillen > INIEDIT_LINE_MAX)
			taillen = 0; /* cannot happen: it was one line */
		sb_add(&b, prefix, pl);
		sb_add(&b, tail, taillen);
		sb_str(&b, d->nl);
		i = 0;
	}
	for (; i < la->n; i++) {
		size_t k;

		for (k = 0; k < indent; k++)
			sb_str(&b, " ");
		sb_str(&b, la->items[i]);
		sb_str(&b, d->nl);
	}
out:
	if (b.oom) {
		free(b.s);
		return NULL;
	}
	return b.s;
}

int
iniedit_set_list(struct iniedit *d, const char *section, const char *key,
    const char *const *items, size_t n)
{
	struct list_arg la = { items, n };
	size_t i;

	if (strpbrk(key, "\r\n=:;#[") != NULL || key[0] == '\0')
		return EGRESS_ERR_INVALID;
	for (i = 0; i < n; i++) {
		const char *p;

		if (items[i][0] == '\0' || items[i][0] == ';' ||
		    items[i][0] == '#' || items[i][0] == '[')
			return EGRESS_ERR_INVALID;
		for (p = items[i]; *p; p++)
			if (*p == ',' || is_sp((unsigned char)*p))
				return EGRESS_ERR_INVALID;
	}
	return key_replace(d, section, key, render_list, &la);
}

int
iniedit_render(const struct iniedit *d, char **ret_buf, size_t *ret_len)
{
	struct sbuf b = { 0 };
	size_t i;

	sb_add(&b, "", 0);
	for (i = 0; i < d->n; i++)
		sb_add(&b, d->v[i].s, d->v[i].len);
	if (b.oom) {
		free(b.s);
		return EGRESS_ERR_NOMEM;
	}
	*ret_buf = b.s;
	*ret_len = b.len;
	return 0;
}

/* ---- Files ------------------------------------------------------------ */

static void seterr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	(void)vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static char *
path_dir(const char *path)
{
	const char *s = strrchr(path, '/');

	if (s == NULL)
		return strdup(".");
	if (s == path)
		return strdup("/");
	return strndup(path, (size_t)(s - path));
}

static const char *
path_base(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

int
iniedit_file_open(const char *path, struct iniedit_file *f, char *err,
    size_t errlen)
{
	char *lock = NULL;
	int fd = -1, rc = EGRESS_ERR_NOMEM;
	size_t cap;
	ssize_t r;

	memset(f, 0, sizeof(*f));
	f->lockfd = -1;
	if ((f->path = strdup(path)) == NULL ||
	    (f->dir = path_dir(path)) == NULL)
		goto fail;
	if (asprintf(&lock, "%s/.%s.lock", f->dir, path_base(path)) < 0) {
		lock = NULL;
		goto fail;
	}
	f->lockfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
	    0600);
	if (f->lockfd == -1) {
		seterr(err, errlen, "%s: %s", lock, strerror(errno));
		rc = EGRESS_ERR_IO;
		goto fail;
	}
	while (flock(f->lockfd, LOCK_EX) == -1)
		if (errno != EINTR) {
			seterr(err, errlen, "%s: lock: %s", lock,
			    strerror(errno));
			rc = EGRESS_ERR_IO;
			goto fail;
		}
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1 ||
	    fstat(fd, &f->st) == -1) {
		seterr(err, errlen, "%s: %s", path, strerror(errno));
		rc = EGRESS_ERR_IO;
		goto fail;
	}
	if (!S_ISREG(f->st.st_mode)) {
		seterr(err, errlen, "%s: %s", path, "not a regular file");
		rc = EGRESS_ERR_INVALID;
		goto fail;
	}
	cap = (size_t)f->st.st_size + 1;
	if (cap > INIEDIT_FILE_MAX + 1) {
		seterr(err, errlen, "%s: %s", path, "file too large");
		rc = EGRESS_ERR_TOO_BIG;
		goto fail;
	}
	if ((f->buf = malloc(INIEDIT_FILE_MAX + 1)) == NULL)
		goto fail;
	for (;;) {
		r = read(fd, f->buf + f->len, INIEDIT_FILE_MAX + 1 - f->len);
		if (r == -1 && errno == EINTR)
			continue;
		if (r == -1) {
			seterr(err, errlen, "%s: %s", path, strerror(errno));
			rc = EGRESS_ERR_IO;
			goto fail;
		}
		if (r == 0)
			break;
		f->len += (size_t)r;
		if (f->len > INIEDIT_FILE_MAX) {
			seterr(err, errlen, "%s: %s", path, "file too large");
			rc = EGRESS_ERR_TOO_BIG;
			goto fail;
		}
	}
	f->buf[f->len] = '\0';
	(void)close(fd);
	free(lock);
	return 0;
fail:
	if (fd != -1)
		(void)close(fd);
	free(lock);
	iniedit_file_close(f);
	return rc;
}

static void
test_pause(void)
{
	const char *h;

	if (getuid() != geteuid() || getgid() != getegid())
		return;
	h = getenv("EGRESSCTL_TEST_PAUSE");
	if (h != NULL && strcmp(h, "after-temp") == 0)
		(void)raise(SIGSTOP);
}

static int
write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t w = write(fd, buf, len);

		if (w == -1 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		buf += w;
		len -= (size_t)w;
	}
	return 0;
}

/* Is the file at path no longer the one read as own (another file, or
 * written since)? */
static int
changed_since(const char *path, const struct stat *own)
{
	struct stat now;

	return stat(path, &now) != 0 || now.st_dev != own->st_dev ||
	    now.st_ino != own->st_ino || now.st_size != own->st_size ||
	    now.st_mtim.tv_sec != own->st_mtim.tv_sec ||
	    now.st_mtim.tv_nsec != own->st_mtim.tv_nsec ||
	    now.st_ctim.tv_sec != own->st_ctim.tv_sec ||
	    now.st_ctim.tv_nsec != own->st_ctim.tv_nsec;
}

/* The shared body of replace and write_atomic. own is NULL for "as
 * created". */
static int
replace(const char *path, const char *buf, size_t len, mode_t mode,
    const struct stat *own, char *err, size_t errlen)
{
	char *dir = NULL, *tmp = NULL;
	int fd = -1, dfd = -1, rc = EGRESS_ERR_IO;

	if ((dir = path_dir(path)) == NULL ||
	    asprintf(&tmp, "%s/.%s.tmp.XXXXXX", dir, path_base(path)) < 0) {
		tmp = NULL;
		rc = EGRESS_ERR_NOMEM;
		goto out;
	}
	if ((fd = mkostemp(tmp, O_CLOEXEC)) == -1) {
		seterr(err, errlen, "%s: %s", tmp, strerror(errno));
		free(tmp);
		tmp = NULL;
		goto out;
	}
	if (own != NULL &&
	    (own->st_uid != geteuid() || own->st_gid != getegid()) &&
	    fchown(fd, own->st_uid, own->st_gid) == -1) {
		seterr(err, errlen, "%s: cannot keep the file's owner: %s",
		    path, strerror(errno));
		goto out;
	}
	if (fchmod(fd, mode & 07777) == -1 || write_all(fd, buf, len) == -1 ||
	    fsync(fd) == -1) {
		seterr(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	if (close(fd) == -1) {
		fd = -1;
		seterr(err, errlen, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	test_pause();
	if (own != NULL && changed_since(path, own)) {
		/* Not through egressctl (it would wait for the lock): by
		 * hand, say. Replacing it would undo that edit unseen. */
		seterr(err, errlen,
		    "%s: changed while this edit was made (an edit by hand?), "
		    "which writing it would undo; this edit was not written: "
		    "run the command again",
		    path);
		rc = EGRESS_ERR_AGAIN;
		goto out;
	}
	if (rename(tmp, path) == -1) {
		seterr(err, errlen, "%s: rename: %s", path, strerror(errno));
		goto out;
	}
	free(tmp);
	tmp = NULL;
	/* The rename is done; a folder that cannot be synced is reported
	 * but the new file is in place. */
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1 ||
	    fsync(dfd) == -1) {
		seterr(err, errlen, "%s: fsync: %s", dir, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (fd != -1)
		(void)close(fd);
	if (dfd != -1)
		(void)close(dfd);
	if (tmp != NULL)
		(void)unlink(tmp);
	free(tmp);
	free(dir);
	return rc;
}

int
iniedit_file_replace(struct iniedit_file *f, const char *buf, size_t len,
    char *err, size_t errlen)
{
	if (f->lockfd == -1)
		return EGRESS_ERR_INVALID;
	return replace(f->path, buf, len, f->st.st_mode, &f->st, err, errlen);
}

int
iniedit_write_atomic(const char *path, const char *buf, size_t len,
    mode_t mode, char *err, size_t errlen)
{
	return replace(path, buf, len, mode, NULL, err, errlen);
}

void
iniedit_file_close(struct iniedit_file *f)
{
	if (f->lockfd != -1)
		(void)close(f->lockfd);
	f->lockfd = -1;
	free(f->path);
	free(f->dir);
	free(f->buf);
	f->path = f->dir = f->buf = NULL;
	f->len = 0;
}
