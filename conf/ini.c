/* SPDX-License-Identifier: ISC */
/*
 * The line-bounded INI reader. Debian's inih is built with a 200-byte line
 * buffer (INI_MAX_LINE, ini_max_line) and silently splits or truncates a
 * longer line, and it keeps only 50 bytes of a section name. So inih never
 * reads the file itself: ini_parse_stream() pulls one line at a time from
 * conf_ini_reader(), which counts lines, refuses a line over CONF_LINE_MAX
 * bytes or with control bytes, strips comments and blanks exactly as inih
 * would, tracks sections itself (also empty ones, which inih never
 * reports), and hands inih a line that is guaranteed to fit. The handler
 * then cross-checks what inih parsed against what the reader saw, applies
 * the section's key schema (scalars once, lists accumulate over repeated
 * keys and indented continuation lines) and records every error with its
 * file and line. Also: error lists, list splitting, decimal integers and
 * bounded file reads with stat identity.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ini.h>
#include <openssl/evp.h>

#include "conf/confint.h"

/* ---- Errors ------------------------------------------------------------ */

void
conf_errors_done(struct conf_errors *e)
{
	size_t i;

	if (e == NULL)
		return;
	for (i = 0; i < e->n; i++)
		free(e->msgs[i]);
	free(e->msgs);
	e->msgs = NULL;
	e->n = 0;
}

static int
errors_push(struct conf_errors *e, char *msg)
{
	char **v;

	if ((v = realloc(e->msgs, (e->n + 1) * sizeof(*v))) == NULL) {
		free(msg);
		return EGRESS_ERR_NOMEM;
	}
	e->msgs = v;
	e->msgs[e->n++] = msg;
	return 0;
}

char *
conf_printable(const char *s)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, o = 0, n = strlen(s), extra = 0;
	unsigned char c;
	char *out;

	for (i = 0; i < n; i++) {
		c = (unsigned char)s[i];
		if (c < 0x20 || c > 0x7e || c == '\\')
			extra += 3;
	}
	if ((out = malloc(n + extra + 1)) == NULL)
		return NULL;
	for (i = 0; i < n; i++) {
		c = (unsigned char)s[i];
		if (c >= 0x20 && c <= 0x7e && c != '\\') {
			out[o++] = (char)c;
			continue;
		}
		out[o++] = '\\';
		out[o++] = 'x';
		out[o++] = hex[c >> 4];
		out[o++] = hex[c & 0xf];
	}
	out[o] = '\0';
	return out;
}

/*
 * msg made printable (conf_printable(); msg is freed), or NULL when out
 * of memory. Messages quote what they refuse, and a manifest is
 * untrusted: its bytes must not reach an operator's terminal (escape
 * sequences, C1 controls, text direction overrides) or a JSON consumer
 * (invalid UTF-8) as they are.
 */
static char *
errors_printable(char *msg)
{
	char *out = conf_printable(msg);

	free(msg);
	return out;
}

int
conf_errors_addf(struct conf_errors *e, const char *fmt, ...)
{
	va_list ap;
	char *msg = NULL;
	int r;

	if (e->n > CONF_ERRORS_MAX)
		return EGRESS_ERR_INVALID;
	if (e->n == CONF_ERRORS_MAX) {
		if ((msg = strdup("further errors left out")) != NULL)
			(void)errors_push(e, msg);
		return EGRESS_ERR_INVALID;
	}
	va_start(ap, fmt);
	r = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (r < 0 || (msg = errors_printable(msg)) == NULL)
		return EGRESS_ERR_INVALID;
	(void)errors_push(e, msg);
	return EGRESS_ERR_INVALID;
}

void
conf_errors_move(struct conf_errors *dst, struct conf_errors *src)
{
	size_t i;

	for (i = 0; i < src->n; i++) {
		if (dst->n > CONF_ERRORS_MAX) {
			free(src->msgs[i]);
			continue;
		}
		(void)errors_push(dst, src->msgs[i]);
	}
	free(src->msgs);
	src->msgs = NULL;
	src->n = 0;
}

char *
conf_errors_join(const struct conf_errors *e)
{
	size_t i, len = 1;
	char *s, *p;

	for (i = 0; i < e->n; i++)
		len += strlen(e->msgs[i]) + 2;
	if ((s = malloc(len)) == NULL)
		return NULL;
	p = s;
	*p = '\0';
	for (i = 0; i < e->n; i++) {
		if (i > 0) {
			memcpy(p, "; ", 2);
			p += 2;
		}
		len = strlen(e->msgs[i]);
		memcpy(p, e->msgs[i], len);
		p += len;
		*p = '\0';
	}
	return s;
}

/* ---- Lists ------------------------------------------------------------- */

static int
list_push(struct conf_list *l, const char *s, size_t n, int line)
{
	struct conf_item *v;
	size_t cap;
	char *copy;

	if (l->n == l->cap) {
		cap = l->cap ? l->cap * 2 : 8;
		if ((v = realloc(l->v, cap * sizeof(*v))) == NULL)
			return EGRESS_ERR_NOMEM;
		l->v = v;
		l->cap = cap;
	}
	if ((copy = strndup(s, n)) == NULL)
		return EGRESS_ERR_NOMEM;
	l->v[l->n].s = copy;
	l->v[l->n].line = line;
	l->n++;
	return 0;
}

static int
is_blank(char c)
{
	return c == ' ' || c == '\t';
}

int
conf_list_add_value(struct conf_list *l, const char *value, int line,
    char *reterr, size_t errlen)
{
	const char *p = value, *start;
	size_t n0 = l->n, i;
	int need_item = 0, nitems = 0, r;

	/* A first pass finds errors, so that a bad value adds nothing. */
	for (;;) {
		while (is_blank(*p))
			p++;
		if (*p == '\0') {
			if (need_item) {
				(void)snprintf(reterr, errlen,
				    "empty item "
				    "after the last ','; remove the trailing "
				    "comma (an indented continuation line "
				    "needs none)");
				return EGRESS_ERR_INVALID;
			}
			break;
		}
		if (*p == ',') {
			if (nitems == 0 || need_item) {
				(void)snprintf(reterr, errlen,
				    "empty item "
				    "at '%s'; separate items with one ',' or "
				    "blanks",
				    p);
				return EGRESS_ERR_INVALID;
			}
			need_item = 1;
			p++;
			continue;
		}
		while (*p != '\0' && *p != ',' && !is_blank(*p))
			p++;
		nitems++;
		need_item = 0;
	}
	for (p = value;;) {
		while (is_blank(*p) || *p == ',')
			p++;
		if (*p == '\0')
			break;
		start = p;
		while (*p != '\0' && *p != ',' && !is_blank(*p))
			p++;
		if ((r = list_push(l, start, (size_t)(p - start), line)) != 0)
			goto fail;
	}
	return 0;
fail:
	for (i = n0; i < l->n; i++)
		free(l->v[i].s);
	l->n = n0;
	(void)snprintf(reterr, errlen, "out of memory");
	return r;
}

void
conf_list_done(struct conf_list *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->v[i].s);
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
}

/* ---- Sections ---------------------------------------------------------- */

int
conf_sec_init(struct conf_sec *sec, const char *name, int line,
    const struct conf_keydef *keys)
{
	size_t n = 0;

	memset(sec, 0, sizeof(*sec));
	while (keys[n].name != NULL)
		n++;
	if ((sec->name = strdup(name)) == NULL)
		return EGRESS_ERR_NOMEM;
	if ((sec->vals = calloc(n ? n : 1, sizeof(*sec->vals))) == NULL) {
		free(sec->name);
		sec->name = NULL;
		return EGRESS_ERR_NOMEM;
	}
	sec->line = line;
	sec->keys = keys;
	sec->nkeys = n;
	return 0;
}

void
conf_sec_done(struct conf_sec *sec)
{
	size_t i;

	if (sec == NULL || sec->vals == NULL)
		return;
	for (i = 0; i < sec->nkeys; i++) {
		free(sec->vals[i].str);
		conf_list_done(&sec->vals[i].list);
	}
	free(sec->vals);
	free(sec->name);
	memset(sec, 0, sizeof(*sec));
}

static ssize_t
sec_key_index(const struct conf_sec *sec, const char *key)
{
	size_t i;

	for (i = 0; i < sec->nkeys; i++)
		if (strcmp(sec->keys[i].name, key) == 0)
			return (ssize_t)i;
	return -1;
}

struct conf_val *
conf_sec_val(struct conf_sec *sec, const char *key)
{
	ssize_t i = sec_key_index(sec, key);

	return i < 0 ? NULL : &sec->vals[i];
}

const struct conf_val *
conf_sec_cval(const struct conf_sec *sec, const char *key)
{
	ssize_t i = sec_key_index(sec, key);

	return i < 0 ? NULL : &sec->vals[i];
}

/* ---- The reader -------------------------------------------------------- */

enum line_kind {
	LINE_OTHER = 0,	  /* blank, comment, section, or refused */
	LINE_KEY = 1,	  /* key = value */
	LINE_CONT = 2,	  /* an indented continuation of the last key */
	LINE_IGNORED = 3, /* a stand-in key line for a refused one */
};

enum sec_state {
	SEC_NONE = 0, /* before the first section header */
	SEC_OK = 1,
	SEC_REFUSED = 2, /* its keys are skipped */
};

struct ini_state {
	const char *path;
	const char *buf;
	size_t len;
	size_t off;
	int line;	  /* number of the line last read */
	int have_prev;	  /* inih holds a previous key name */
	int prev_ignored; /* continuations of it are skipped */

	conf_ini_section_fn section_fn;
	void *ctx;
	struct conf_errors *errs;
	size_t nerrs0;
	int nomem;

	/* Sections seen so far, for duplicate detection. */
	char **secs;
	int *seclines;
	size_t nsecs;

	enum sec_state sec_state;
	struct conf_sec *sec;
	char *secname; /* current section name (messages) */

	enum line_kind kind;
	char key[CONF_KEY_MAX + 1];
	char value[CONF_LINE_MAX + 1];
};

static void ini_err(struct ini_state *st, const char *key, const char *fmt,
    ...) __attribute__((format(printf, 3, 4)));

/* Add "PATH:LINE: [section] key: message" for the current line. */
static void
ini_err(struct ini_state *st, const char *key, const char *fmt, ...)
{
	va_list ap;
	char *msg = NULL;
	int r;

	va_start(ap, fmt);
	r = vasprintf(&msg, fmt, ap);
	va_end(ap);
	if (r < 0) {
		st->nomem = 1;
		return;
	}
	if (st->secname != NULL && key != NULL)
		conf_errors_addf(st->errs, "%s:%d: [%s] %s: %s", st->path,
		    st->line, st->secname, key, msg);
	else if (st->secname != NULL)
		conf_errors_addf(st->errs, "%s:%d: [%s]: %s", st->path,
		    st->line, st->secname, msg);
	else if (key != NULL)
		conf_errors_addf(st->errs, "%s:%d: %s: %s", st->path, st->line,
		    key, msg);
	else
		conf_errors_addf(st->errs, "%s:%d: %s", st->path, st->line,
		    msg);
	free(msg);
}

static int
is_key_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

/* Copy out into inih's buffer if it fits (num includes the NUL). */
static int
deliver(struct ini_state *st, char *str, int num, const char *out)
{
	size_t n = strlen(out);

	if (num <= 0 || n >= (size_t)num) {
		ini_err(st, NULL,
		    "line is too long for the INI parser: "
		    "%zu bytes remain once the indentation, blanks around "
		    "'=' and comments are dropped, and at most %d fit; "
		    "split it over indented continuation lines",
		    n, num > 0 ? num - 1 : 0);
		return -1;
	}
	memcpy(str, out, n + 1);
	return 0;
}

/* A stand-in for a refused key line: inih records it as the previous key
 * (as it would the real one), and the handler skips it and its
 * continuations. */
static char *
deliver_ignored_key(struct ini_state *st, char *str, int num)
{
	st->kind = LINE_IGNORED;
	st->have_prev = 1;
	st->prev_ignored = 1;
	(void)deliver(st, str, num, "_=");
	return str;
}

static char *
deliver_comment(struct ini_state *st, char *str, int num)
{
	st->kind = LINE_OTHER;
	(void)deliver(st, str, num, ";");
	return str;
}

static void
open_section(struct ini_state *st, const char *name)
{
	char **secs;
	int *lines;
	size_t i;

	free(st->secname);
	st->secname = strdup(name);
	st->sec = NULL;
	st->sec_state = SEC_REFUSED;
	if (st->secname == NULL) {
		st->nomem = 1;
		return;
	}
	for (i = 0; i < st->nsecs; i++) {
		if (strcmp(st->secs[i], name) == 0) {
			ini_err(st, NULL,
			    "section given twice (first at "
			    "line %d); merge the two",
			    st->seclines[i]);
			return;
		}
	}
	secs = realloc(st->secs, (st->nsecs + 1) * sizeof(*secs));
	if (secs != NULL)
		st->secs = secs;
	lines = realloc(st->seclines, (st->nsecs + 1) * sizeof(*lines));
	if (lines != NULL)
		st->seclines = lines;
	if (secs == NULL || lines == NULL ||
	    (st->secs[st->nsecs] = strdup(name)) == NULL) {
		st->nomem = 1;
		return;
	}
	st->seclines[st->nsecs++] = st->line;
	st->sec = st->section_fn(st->ctx, st->path, name, st->line, st->errs);
	if (st->sec != NULL)
		st->sec_state = SEC_OK;
}

static char *
conf_ini_reader(char *str, int num, void *stream)
{
	struct ini_state *st = stream;
	char tmp[CONF_LINE_MAX + 2], out[2 * CONF_LINE_MAX + 4];
	const char *raw, *nl;
	char *body, *p, *sep, *name, *value;
	size_t rawlen, i, n;
	int indent;

	if (st->off >= st->len || st->nomem)
		return NULL;
	raw = st->buf + st->off;
	nl = memchr(raw, '\n', st->len - st->off);
	rawlen = nl != NULL ? (size_t)(nl - raw) : st->len - st->off;
	st->off += rawlen + (nl != NULL);
	st->line++;
	st->kind = LINE_OTHER;
	if (rawlen > 0 && raw[rawlen - 1] == '\r')
		rawlen--;
	if (st->line == 1 && rawlen >= 3 &&
	    memcmp(raw, "\xef\xbb\xbf", 3) == 0) {
		raw += 3;
		rawlen -= 3;
	}
	if (rawlen > CONF_LINE_MAX) {
		ini_err(st, NULL,
		    "line is %zu bytes long; at most %d are "
		    "allowed (split a list over indented continuation lines)",
		    rawlen, CONF_LINE_MAX);
		/* A continuation of a refused line must not land elsewhere. */
		return st->have_prev ? deliver_ignored_key(st, str, num) :
				       deliver_comment(st, str, num);
	}
	for (i = 0; i < rawlen; i++) {
		unsigned char c = (unsigned char)raw[i];

		if ((c < 0x20 && c != '\t') || c == 0x7f) {
			ini_err(st, NULL,
			    "control byte 0x%02x at column %zu; "
			    "only printable text and tabs are allowed",
			    c, i + 1);
			return st->have_prev ?
			    deliver_ignored_key(st, str, num) :
			    deliver_comment(st, str, num);
		}
	}
	memcpy(tmp, raw, rawlen);
	tmp[rawlen] = '\0';

	indent = is_blank(tmp[0]);
	body = tmp;
	while (is_blank(*body))
		body++;
	if (*body == '\0') {
		(void)deliver(st, str, num, "");
		return str;
	}
	if (*body == ';' || *body == '#')
		return deliver_comment(st, str, num);
	/* An inline comment: ';' after a blank, as inih reads it. */
	for (p = body + 1; *p != '\0'; p++) {
		if (*p == ';' && is_blank(p[-1])) {
			*p = '\0';
			break;
		}
	}
	n = strlen(body);
	while (n > 0 && is_blank(body[n - 1]))
		body[--n] = '\0';

	if (indent && st->have_prev) {
		/* inih passes this line as the previous key again. */
		st->kind = st->prev_ignored ? LINE_IGNORED : LINE_CONT;
		out[0] = '\t';
		memcpy(out + 1, body, n + 1);
		memcpy(st->value, body, n + 1);
		if (deliver(st, str, num, out) != 0) {
			st->kind = LINE_OTHER;
			return deliver_ignored_key(st, str, num);
		}
		return str;
	}

	if (*body == '[') {
		if (n < 2 || body[n - 1] != ']' ||
		    memchr(body + 1, ']', n - 2) != NULL ||
		    memchr(body + 1, '[', n - 2) != NULL) {
			ini_err(st, NULL,
			    "malformed section header '%s'; "
			    "write [name] alone on its line",
			    body);
			free(st->secname);
			st->secname = NULL;
			st->sec = NULL;
			st->sec_state = SEC_REFUSED;
			return deliver_comment(st, str, num);
		}
		body[n - 1] = '\0';
		if (deliver(st, str, num, "[s]") != 0)
			return str;
		/* inih forgets the previous key at a section header. */
		st->have_prev = 0;
		st->prev_ignored = 0;
		if (n == 2) {
			free(st->secname);
			st->secname = NULL;
			ini_err(st, NULL, "empty section name '[]'");
			st->sec = NULL;
			st->sec_state = SEC_REFUSED;
			return str;
		}
		open_section(st, body + 1);
		return str;
	}

	/* A key line. */
	sep = strpbrk(body, "=:");
	if (sep == NULL || *sep == ':') {
		ini_err(st, NULL, "expected 'key = value', not '%s'", body);
		return deliver_ignored_key(st, str, num);
	}
	*sep = '\0';
	name = body;
	n = strlen(name);
	while (n > 0 && is_blank(name[n - 1]))
		name[--n] = '\0';
	value = sep + 1;
	while (is_blank(*value))
		value++;
	if (n == 0) {
		ini_err(st, NULL, "missing key name before '='");
		return deliver_ignored_key(st, str, num);
	}
	for (i = 0; i < n; i++)
		if (!is_key_char(name[i]))
			break;
	if (i < n || n > CONF_KEY_MAX) {
		ini_err(st, NULL,
		    "'%s' is not a key name (keys are lowercase "
		    "letters, digits and '_')",
		    name);
		return deliver_ignored_key(st, str, num);
	}
	(void)snprintf(out, sizeof(out), "%s=%s", name, value);
	if (deliver(st, str, num, out) != 0)
		return deliver_ignored_key(st, str, num);
	memcpy(st->key, name, n + 1);
	(void)snprintf(st->value, sizeof(st->value), "%s", value);
	st->kind = LINE_KEY;
	st->have_prev = 1;
	st->prev_ignored = 0;
	return str;
}

static void
sec_known_keys(const struct conf_sec *sec, char *buf, size_t n)
{
	size_t i, off = 0;

	buf[0] = '\0';
	for (i = 0; i < sec->nkeys && off < n; i++)
		off += (size_t)snprintf(buf + off, n - off, "%s%s",
		    i ? ", " : "", sec->keys[i].name);
}

static int
conf_ini_handler(void *user, const char *section, const char *name,
    const char *value)
{
	struct ini_state *st = user;
	struct conf_val *val;
	char msg[POLICY_MSG_MAX + 64], known[512];
	ssize_t ki;
	int r;

	(void)section;
	if (st->kind == LINE_IGNORED)
		return 1;
	if (st->kind != LINE_KEY && st->kind != LINE_CONT) {
		ini_err(st, NULL, "internal error: unexpected key '%s'", name);
		return 1;
	}
	/* What inih parsed must be exactly what the reader saw. */
	if ((st->kind == LINE_KEY && strcmp(name, st->key) != 0) ||
	    strcmp(value, st->value) != 0) {
		ini_err(st, st->key,
		    "internal error: the INI parser read "
		    "'%s = %s'",
		    name, value);
		st->prev_ignored = 1;
		return 1;
	}
	if (st->sec_state == SEC_NONE) {
		ini_err(st, st->key,
		    "key outside any section; put it under "
		    "its [section]");
		st->prev_ignored = 1;
		return 1;
	}
	if (st->sec_state == SEC_REFUSED || st->sec == NULL) {
		st->prev_ignored = 1;
		return 1;
	}
	if ((ki = sec_key_index(st->sec, st->key)) < 0) {
		sec_known_keys(st->sec, known, sizeof(known));
		ini_err(st, st->key, "unknown key; [%s] takes: %s",
		    st->secname, known);
		st->prev_ignored = 1;
		return 1;
	}
	val = &st->sec->vals[ki];
	if (!st->sec->keys[ki].list) {
		if (st->kind == LINE_CONT) {
			ini_err(st, st->key,
			    "a single value cannot continue "
			    "on an indented line ('%s'); remove the "
			    "indentation if it is a new key",
			    st->value);
			return 1;
		}
		if (val->line != 0) {
			ini_err(st, st->key,
			    "given twice (first at line %d); "
			    "keep one",
			    val->line);
			return 1;
		}
		val->line = st->line;
		if (st->value[0] == '\0') {
			ini_err(st, st->key,
			    "empty value; write a value or "
			    "remove the line to use the default");
			return 1;
		}
#ifndef __clang__ /* gcc 12 -fanalyzer loses the block stored in *val */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wanalyzer-malloc-leak"
#endif
		if ((val->str = strdup(st->value)) == NULL)
#ifndef __clang__
#pragma GCC diagnostic pop
#endif
			st->nomem = 1;
		return 1;
	}
	if (val->line == 0)
		val->line = st->line;
	r = conf_list_add_value(&val->list, st->value, st->line, msg,
	    sizeof(msg));
	if (r == EGRESS_ERR_NOMEM)
		st->nomem = 1;
	else if (r != 0)
		ini_err(st, st->key, "%s", msg);
	return 1;
}

int
conf_ini_parse(const char *path, const char *buf, size_t len,
    conf_ini_section_fn section, void *ctx, struct conf_errors *errs)
{
	struct ini_state st;
	size_t i;
	int r, rc;

	memset(&st, 0, sizeof(st));
	st.path = path;
	st.buf = buf;
	st.len = len;
	st.section_fn = section;
	st.ctx = ctx;
	st.errs = errs;
	st.nerrs0 = errs->n;

	r = ini_parse_stream(conf_ini_reader, &st, conf_ini_handler, &st);
	if (st.nomem || r == -2) {
		rc = EGRESS_ERR_NOMEM;
	} else if (r != 0 && errs->n == st.nerrs0) {
		/* inih refused a line the reader let through. */
		conf_errors_addf(errs, "%s:%d: syntax error", path, r);
		rc = EGRESS_ERR_INVALID;
	} else {
		rc = errs->n > st.nerrs0 ? EGRESS_ERR_INVALID : 0;
	}
	for (i = 0; i < st.nsecs; i++)
		free(st.secs[i]);
	free(st.secs);
	free(st.seclines);
	free(st.secname);
	return rc;
}

/* ---- Values ------------------------------------------------------------ */

int
conf_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *ret)
{
	uint64_t v = 0;
	size_t i;

	if (s[0] == '\0' || (s[0] == '0' && s[1] != '\0'))
		return EGRESS_ERR_INVALID;
	for (i = 0; s[i] != '\0'; i++) {
		if (s[i] < '0' || s[i] > '9' || i >= 19)
			return EGRESS_ERR_INVALID;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v < min || v > max)
		return EGRESS_ERR_INVALID;
	*ret = v;
	return 0;
}

/* ---- Files ------------------------------------------------------------- */

static int64_t racy_window_ns = 1000000000;

void
conf_set_racy_window_ns(int64_t ns)
{
	racy_window_ns = ns;
}

static void
id_from_stat(struct conf_file_id *id, const struct stat *sb)
{
	struct timespec now;
	int64_t now_ns, last;

	id->exists = 1;
	id->dev = sb->st_dev;
	id->ino = sb->st_ino;
	id->size = sb->st_size;
	id->mode = sb->st_mode;
	id->mtime_ns = (int64_t)sb->st_mtim.tv_sec * 1000000000 +
	    sb->st_mtim.tv_nsec;
	id->ctime_ns = (int64_t)sb->st_ctim.tv_sec * 1000000000 +
	    sb->st_ctim.tv_nsec;
	/* A clock that fails makes every file racy: re-read, never miss. */
	id->racy = 1;
	if (clock_gettime(CLOCK_REALTIME, &now) == 0) {
		now_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
		last = id->mtime_ns > id->ctime_ns ?
		    id->mtime_ns :
		    id->ctime_ns;
		id->racy = now_ns - last < racy_window_ns;
	}
}

int
conf_file_id_stat(const char *path, struct conf_file_id *id)
{
	struct stat sb;

	id->exists = 0;
	id->dev = 0;
	id->ino = 0;
	id->size = 0;
	id->mtime_ns = id->ctime_ns = 0;
	id->racy = 0;
	if (stat(path, &sb) != 0)
		return errno == ENOENT || errno == ENOTDIR ? 0 : EGRESS_ERR_IO;
	id_from_stat(id, &sb);
	return 0;
}

int
conf_read_file(const char *path, size_t max, char **ret_buf, size_t *ret_len,
    struct conf_file_id *id)
{
	struct stat sb;
	char *buf = NULL;
	size_t len = 0;
	ssize_t n;
	char *idpath = id->path;
	int fd, rc, saved;

	memset(id, 0, sizeof(*id));
	id->path = idpath;
	/* Non-blocking: a FIFO or device there must not stall the open
	 * (only a regular file is read, where the flag changes nothing). */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) <
	    0)
		return errno == ENOENT || errno == ENOTDIR ?
		    EGRESS_ERR_NOT_FOUND :
		    EGRESS_ERR_IO;
	if (fstat(fd, &sb) != 0) {
		rc = EGRESS_ERR_IO;
		goto out;
	}
	id_from_stat(id, &sb);
	if (!S_ISREG(sb.st_mode)) {
		errno = S_ISDIR(sb.st_mode) ? EISDIR : EINVAL;
		rc = EGRESS_ERR_IO;
		goto out;
	}
	if ((uint64_t)sb.st_size > max) {
		rc = EGRESS_ERR_TOO_BIG;
		goto out;
	}
	/* Read one byte past max so that a file that grew is caught. */
	if ((buf = malloc(max + 2)) == NULL) {
		rc = EGRESS_ERR_NOMEM;
		goto out;
	}
	for (;;) {
		n = read(fd, buf + len, max + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = EGRESS_ERR_IO;
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max) {
			rc = EGRESS_ERR_TOO_BIG;
			goto out;
		}
	}
	buf[len] = '\0';
	if (EVP_Digest(buf, len, id->digest, NULL, EVP_sha256(), NULL) != 1) {
		rc = EGRESS_ERR_NOMEM;
		goto out;
	}
	id->has_digest = 1;
	*ret_buf = buf;
	*ret_len = len;
	buf = NULL;
	rc = 0;
out:
	saved = errno;
	free(buf);
	(void)close(fd);
	errno = saved;
	return rc;
}
