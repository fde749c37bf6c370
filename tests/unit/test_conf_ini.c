/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for the line-bounded INI reader (conf/ini.c): every syntax
 * error with its line number, the 200-byte line limit (exactly 200
 * accepted, 201 refused, nothing truncated), comments, continuation lists,
 * repeated list keys, duplicate scalars and sections, unknown keys and
 * sections, control bytes, list splitting and decimal integers. Uses a
 * small test schema: [a] s (scalar), l (list); [b] x (scalar).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "conf/confint.h"

static const struct conf_keydef a_keys[] = {
	{ "s", 0 },
	{ "l", 1 },
	{ NULL, 0 },
};
static const struct conf_keydef b_keys[] = {
	{ "x", 0 },
	{ NULL, 0 },
};

struct tparse {
	struct conf_sec a, b;
	int have_a, have_b;
};

static struct conf_sec *
t_section(void *ctx, const char *path, const char *name, int line,
    struct conf_errors *errs)
{
	struct tparse *tp = ctx;

	if (strcmp(name, "a") == 0) {
		cr_assert_eq(conf_sec_init(&tp->a, name, line, a_keys), 0);
		tp->have_a = 1;
		return &tp->a;
	}
	if (strcmp(name, "b") == 0) {
		cr_assert_eq(conf_sec_init(&tp->b, name, line, b_keys), 0);
		tp->have_b = 1;
		return &tp->b;
	}
	conf_errors_addf(errs, "%s:%d: [%s]: unknown section", path, line,
	    name);
	return NULL;
}

static int
t_parse(const char *text, size_t len, struct tparse *tp,
    struct conf_errors *errs)
{
	memset(tp, 0, sizeof(*tp));
	return conf_ini_parse("t.ini", text, len, t_section, tp, errs);
}

static void
t_done(struct tparse *tp, struct conf_errors *errs)
{
	conf_sec_done(&tp->a);
	conf_sec_done(&tp->b);
	conf_errors_done(errs);
}

/* Join the items of [a] l with '|'. */
static void
join_list(struct tparse *tp, char *buf, size_t n)
{
	const struct conf_val *v;
	size_t i, off = 0;

	buf[0] = '\0';
	if (!tp->have_a)
		return;
	v = conf_sec_cval(&tp->a, "l");
	for (i = 0; i < v->list.n; i++)
		off += (size_t)snprintf(buf + off, n - off, "%s%s",
		    i ? "|" : "", v->list.v[i].s);
}

/* ---- Errors, each with its file, line and field ------------------------ */

struct err_case {
	char in[256];
	char msg[256]; /* the first error message, exactly */
	size_t nerrs;
};

ParameterizedTestParameters(conf_ini, errors)
{
	static struct err_case cases[] = {
		{ "[a]\ns = 1\ns = 2\n",
		    "t.ini:3: [a] s: given twice (first at line 2); keep one",
		    1 },
		{ "[a]\ns = 1\n  more\n",
		    "t.ini:3: [a] s: a single value cannot continue on an "
		    "indented line ('more'); remove the indentation if it is a "
		    "new key",
		    1 },
		{ "[a]\nzz = 1\n",
		    "t.ini:2: [a] zz: unknown key; [a] takes: s, l", 1 },
		{ "[c]\n", "t.ini:1: [c]: unknown section", 1 },
		{ "[a]\n[a]\n",
		    "t.ini:2: [a]: section given twice (first at line 1); merge "
		    "the two",
		    1 },
		{ "s = 1\n",
		    "t.ini:1: s: key outside any section; put it under its "
		    "[section]",
		    1 },
		{ "[a]\njust words\n",
		    "t.ini:2: [a]: expected 'key = value', not 'just words'",
		    1 },
		{ "[a]\ns: 1\n",
		    "t.ini:2: [a]: expected 'key = value', not 's: 1'", 1 },
		{ "[a]\n= 1\n", "t.ini:2: [a]: missing key name before '='",
		    1 },
		{ "[a]\nS = 1\n",
		    "t.ini:2: [a]: 'S' is not a key name (keys are lowercase "
		    "letters, digits and '_')",
		    1 },
		{ "[a\n",
		    "t.ini:1: malformed section header '[a'; write [name] alone "
		    "on its line",
		    1 },
		{ "[a] x\n",
		    "t.ini:1: malformed section header '[a] x'; write [name] "
		    "alone on its line",
		    1 },
		{ "[a]]\n",
		    "t.ini:1: malformed section header '[a]]'; write [name] "
		    "alone on its line",
		    1 },
		{ "[]\n", "t.ini:1: empty section name '[]'", 1 },
		{ "[a]\ns =\n",
		    "t.ini:2: [a] s: empty value; write a value or remove the "
		    "line to use the default",
		    1 },
		{ "[a]\nl = x,,y\n",
		    "t.ini:2: [a] l: empty item at ',y'; separate items with "
		    "one ',' or blanks",
		    1 },
		{ "[a]\nl = x,\n",
		    "t.ini:2: [a] l: empty item after the last ','; remove the "
		    "trailing comma (an indented continuation line needs none)",
		    1 },
		{ "[a]\nl = ,x\n",
		    "t.ini:2: [a] l: empty item at ',x'; separate items with "
		    "one ',' or blanks",
		    1 },
		{ "[a]\nl = x\n  y,\n",
		    "t.ini:3: [a] l: empty item after the last ','; remove the "
		    "trailing comma (an indented continuation line needs none)",
		    1 },
		{ "[a]\ns = a\tb\x01\n",
		    "t.ini:2: [a]: control byte 0x01 at column 8; only "
		    "printable text and tabs are allowed",
		    1 },
		{ "[a]\ns = a\rb\n",
		    "t.ini:2: [a]: control byte 0x0d at column 6; only "
		    "printable text and tabs are allowed",
		    1 },
		/* Every error of the file, in order, not just the first. */
		{ "[a]\nzz = 1\ns = 1\ns = 2\n[c]\n[b]\nx = 1\ny = 2\n",
		    "t.ini:2: [a] zz: unknown key; [a] takes: s, l", 4 },
		/* Keys of a refused section are skipped without noise. */
		{ "[c]\nfoo = 1\n  bar\n", "t.ini:1: [c]: unknown section",
		    1 },
		/* Continuations of an unknown key are not reported again. */
		{ "[a]\nzz = 1\n  2\n  3\n",
		    "t.ini:2: [a] zz: unknown key; [a] takes: s, l", 1 },
	};

	return cr_make_param_array(struct err_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct err_case *c, conf_ini, errors)
{
	struct tparse tp;
	struct conf_errors errs = { 0 };
	int r;

	r = t_parse(c->in, strlen(c->in), &tp, &errs);
	cr_assert_eq(r, EGRESS_ERR_INVALID, "input: %s", c->in);
	cr_assert_geq(errs.n, 1);
	cr_expect_str_eq(errs.msgs[0], c->msg);
	cr_expect_eq(errs.n, c->nerrs, "%zu errors, first: %s", errs.n,
	    errs.msgs[0]);
	t_done(&tp, &errs);
}

Test(conf_ini, nul_byte_is_refused)
{
	static const char in[] = "[a]\ns = a\0b\nl = x\n";
	struct tparse tp;
	struct conf_errors errs = { 0 };

	cr_assert_eq(t_parse(in, sizeof(in) - 1, &tp, &errs),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(errs.n, 1);
	cr_expect_str_eq(errs.msgs[0],
	    "t.ini:2: [a]: control byte 0x00 at "
	    "column 6; only printable text and tabs are allowed");
	/* Nothing of the refused line got through. */
	cr_expect_eq(conf_sec_cval(&tp.a, "s")->line, 0);
	t_done(&tp, &errs);
}

/* ---- Accepted forms ----------------------------------------------------- */

struct list_case {
	char in[256];
	char items[256]; /* [a] l joined with '|' */
	char s[64];	 /* [a] s, "" when unset */
};

ParameterizedTestParameters(conf_ini, accepted)
{
	static struct list_case cases[] = {
		{ "[a]\nl = x, y z\n", "x|y|z", "" },
		{ "[a]\nl = x , y\n", "x|y", "" },
		{ "[a]\nl =\n", "", "" },
		{ "[a]\nl = x\n    y\n\tz, w\n", "x|y|z|w", "" },
		/* A list key given again adds to it. */
		{ "[a]\nl = x\ns = 1\nl = y\n", "x|y", "1" },
		/* Comments: ';' or '#' at line start (also indented), ';'
		 * after a blank anywhere, also on continuation lines. */
		{ "; c\n# c\n[a] ; c\ns = 1 ; c\nl = x ; c\n  ; c\n  y ;c\n",
		    "x|y", "1" },
		/* ';' not after a blank and '#' inside are values. */
		{ "[a]\ns = a;b\nl = x#y\n", "x#y", "a;b" },
		/* A blank line does not end a continuation (inih). */
		{ "[a]\nl = x\n\n  y\n", "x|y", "" },
		/* An indented key right after a header is a key. */
		{ "[a]\n  s = 1\n", "", "1" },
		/* CRLF endings, a UTF-8 BOM, no final newline. */
		{ "\xef\xbb\xbf[a]\r\ns = 1\r\nl = x", "x", "1" },
		/* Blanks around '=' are not part of key or value. */
		{ "[a]\ns\t=\t v w \t\n", "", "v w" },
		/* '=' in a value stays. */
		{ "[a]\ns = a=b\n", "", "a=b" },
		/* An empty section is known to the reader. */
		{ "[b]\n[a]\ns = 1\n", "", "1" },
	};

	return cr_make_param_array(struct list_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct list_case *c, conf_ini, accepted)
{
	struct tparse tp;
	struct conf_errors errs = { 0 };
	const struct conf_val *s;
	char items[256];
	int r;

	r = t_parse(c->in, strlen(c->in), &tp, &errs);
	cr_assert_eq(r, 0, "input: %s: %s", c->in, errs.n ? errs.msgs[0] : "");
	cr_assert(tp.have_a);
	join_list(&tp, items, sizeof(items));
	cr_expect_str_eq(items, c->items);
	s = conf_sec_cval(&tp.a, "s");
	cr_expect_str_eq(s->str != NULL ? s->str : "", c->s);
	t_done(&tp, &errs);
}

Test(conf_ini, list_items_carry_their_lines)
{
	static const char in[] = "[a]\nl = x\n  y\n\n  z\nl = w\n";
	struct tparse tp;
	struct conf_errors errs = { 0 };
	const struct conf_val *v;

	cr_assert_eq(t_parse(in, strlen(in), &tp, &errs), 0);
	v = conf_sec_cval(&tp.a, "l");
	cr_assert_eq(v->list.n, 4);
	cr_expect_eq(v->list.v[0].line, 2);
	cr_expect_eq(v->list.v[1].line, 3);
	cr_expect_eq(v->list.v[2].line, 5);
	cr_expect_eq(v->list.v[3].line, 6);
	cr_expect_eq(v->line, 2);
	cr_expect_eq(tp.a.line, 1);
	t_done(&tp, &errs);
}

/* ---- The line limit ----------------------------------------------------- */

/* A "[a]" line, then "l = " and items up to exactly len bytes on line 2,
 * then "s = 1" on line 3. */
static char *
long_line_input(size_t len, const char *prefix)
{
	size_t off, plen = strlen(prefix);
	char *s = malloc(len + 32);

	cr_assert_not_null(s);
	off = (size_t)sprintf(s, "[a]\n");
	memcpy(s + off, prefix, plen);
	memset(s + off + plen, 'x', len - plen);
	off += len;
	off += (size_t)sprintf(s + off, "\ns = 1\n");
	s[off] = '\0';
	return s;
}

Test(conf_ini, line_of_200_bytes_is_accepted_whole)
{
	char *in = long_line_input(CONF_LINE_MAX, "l = ");
	struct tparse tp;
	struct conf_errors errs = { 0 };
	const struct conf_val *v;

	cr_assert_eq(t_parse(in, strlen(in), &tp, &errs), 0, "%s",
	    errs.n ? errs.msgs[0] : "");
	v = conf_sec_cval(&tp.a, "l");
	cr_assert_eq(v->list.n, 1);
	cr_expect_eq(strlen(v->list.v[0].s), CONF_LINE_MAX - 4);
	cr_expect_str_eq(conf_sec_cval(&tp.a, "s")->str, "1");
	t_done(&tp, &errs);
	free(in);
}

Test(conf_ini, indented_continuation_of_200_bytes_is_accepted_whole)
{
	struct tparse tp;
	struct conf_errors errs = { 0 };
	const struct conf_val *v;
	char *in = malloc(512);

	/* Line 3: two blanks and 198 bytes continue the list of line 2. */
	cr_assert_not_null(in);
	strcpy(in, "[a]\nl = y\n  ");
	memset(in + strlen(in), 'x', CONF_LINE_MAX - 2);
	in[12 + CONF_LINE_MAX - 2] = '\0';
	strcat(in, "\n");
	cr_assert_eq(t_parse(in, strlen(in), &tp, &errs), 0, "%s",
	    errs.n ? errs.msgs[0] : "");
	v = conf_sec_cval(&tp.a, "l");
	cr_assert_eq(v->list.n, 2);
	cr_expect_eq(strlen(v->list.v[1].s), CONF_LINE_MAX - 2);
	t_done(&tp, &errs);
	free(in);
}

Test(conf_ini, line_of_201_bytes_is_refused)
{
	char *in = long_line_input(CONF_LINE_MAX + 1, "l = ");
	struct tparse tp;
	struct conf_errors errs = { 0 };
	const struct conf_val *v;

	cr_assert_eq(t_parse(in, strlen(in), &tp, &errs), EGRESS_ERR_INVALID);
	cr_assert_eq(errs.n, 1);
	cr_expect_str_eq(errs.msgs[0],
	    "t.ini:2: [a]: line is 201 bytes "
	    "long; at most 200 are allowed (split a list over indented "
	    "continuation lines)");
	/* Nothing of it, truncated or not, reached the schema, and the
	 * next line is still read as line 3. */
	v = conf_sec_cval(&tp.a, "l");
	cr_expect_eq(v->list.n, 0);
	cr_expect_str_eq(conf_sec_cval(&tp.a, "s")->str, "1");
	cr_expect_eq(conf_sec_cval(&tp.a, "s")->line, 3);
	t_done(&tp, &errs);
	free(in);
}

Test(conf_ini, long_line_is_refused_with_later_errors_on_their_lines)
{
	char *in = long_line_input(1000, "l = ");
	char *full = malloc(strlen(in) + 32);
	struct tparse tp;
	struct conf_errors errs = { 0 };

	cr_assert_not_null(full);
	(void)sprintf(full, "%szz = 1\n", in);
	cr_assert_eq(t_parse(full, strlen(full), &tp, &errs),
	    EGRESS_ERR_INVALID);
	cr_assert_eq(errs.n, 2);
	cr_expect_str_eq(errs.msgs[1],
	    "t.ini:4: [a] zz: unknown key; [a] "
	    "takes: s, l");
	t_done(&tp, &errs);
	free(in);
	free(full);
}

Test(conf_ini, continuation_of_a_refused_long_line_is_not_misattributed)
{
	struct tparse tp;
	struct conf_errors errs = { 0 };
	char in[600];

	strcpy(in, "[a]\nl = x\n  ");
	memset(in + strlen(in), 'y', 300);
	in[12 + 300] = '\0';
	strcat(in, "\n  z\n");
	cr_assert_eq(t_parse(in, strlen(in), &tp, &errs), EGRESS_ERR_INVALID);
	cr_assert_eq(errs.n, 1);
	cr_expect_eq(conf_sec_cval(&tp.a, "l")->list.n, 1);
	t_done(&tp, &errs);
}

/* A 200-byte line with no blank to drop cannot fit inih's 200-byte buffer
 * (199 bytes and a NUL): refused, never truncated. */
Test(conf_ini, dense_line_of_200_bytes_is_refused_not_truncated)
{
	char *in = long_line_input(CONF_LINE_MAX, "l=");
	struct tparse tp;
	struct conf_errors errs = { 0 };

	cr_assert_eq(t_parse(in, strlen(in), &tp, &errs), EGRESS_ERR_INVALID);
	cr_assert_eq(errs.n, 1);
	cr_expect_str_eq(errs.msgs[0],
	    "t.ini:2: [a]: line is too long for "
	    "the INI parser: 200 bytes remain once the indentation, blanks "
	    "around '=' and comments are dropped, and at most 199 fit; split "
	    "it over indented continuation lines");
	cr_expect_eq(conf_sec_cval(&tp.a, "l")->list.n, 0);
	t_done(&tp, &errs);
	free(in);
}

Test(conf_ini, long_section_names_are_not_truncated)
{
	/* inih keeps 49 bytes of a section name; the reader keeps all. */
	static const char in[] =
	    "[a]\n[aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaa]\nx = 1\n";
	struct tparse tp;
	struct conf_errors errs = { 0 };

	cr_assert_eq(t_parse(in, strlen(in), &tp, &errs), EGRESS_ERR_INVALID);
	cr_assert_eq(errs.n, 1);
	cr_expect(
	    strstr(errs.msgs[0],
		"t.ini:2: [aaaaaaaaaaaaaaaaaaaaaaaaaa"
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa]: unknown section") ==
		errs.msgs[0],
	    "%s", errs.msgs[0]);
	t_done(&tp, &errs);
}

Test(conf_ini, errors_are_capped)
{
	struct tparse tp;
	struct conf_errors errs = { 0 };
	char *in = malloc(20000);
	size_t i, off;

	cr_assert_not_null(in);
	off = (size_t)sprintf(in, "[a]\n");
	for (i = 0; i < 1000; i++)
		off += (size_t)sprintf(in + off, "zz = %zu\n", i);
	cr_assert_eq(t_parse(in, off, &tp, &errs), EGRESS_ERR_INVALID);
	cr_expect_eq(errs.n, CONF_ERRORS_MAX + 1);
	cr_expect_str_eq(errs.msgs[CONF_ERRORS_MAX],
	    "further errors left out");
	t_done(&tp, &errs);
	free(in);
}

/* ---- Values ------------------------------------------------------------- */

struct uint_case {
	char in[32];
	int ok;
	unsigned long long want;
};

ParameterizedTestParameters(conf_ini, uint)
{
	static struct uint_case cases[] = {
		{ "1", 1, 1 },
		{ "3600000", 1, 3600000 },
		{ "0", 0, 0 },
		{ "3600001", 0, 0 },
		{ "", 0, 0 },
		{ "+5", 0, 0 },
		{ "-5", 0, 0 },
		{ "05", 0, 0 },
		{ "0x10", 0, 0 },
		{ "1e3", 0, 0 },
		{ " 5", 0, 0 },
		{ "5 ", 0, 0 },
		{ "99999999999999999999999", 0, 0 },
		{ "12a", 0, 0 },
	};

	return cr_make_param_array(struct uint_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct uint_case *c, conf_ini, uint)
{
	uint64_t v = 0;
	int r = conf_parse_uint(c->in, 1, 3600000, &v);

	cr_expect_eq(r == 0, c->ok, "'%s'", c->in);
	if (c->ok)
		cr_expect_eq(v, c->want);
}

Test(conf_ini, list_value_with_an_error_adds_nothing)
{
	struct conf_list l = { 0 };
	char msg[256];

	cr_assert_eq(conf_list_add_value(&l, "a b", 1, msg, sizeof(msg)), 0);
	cr_assert_eq(conf_list_add_value(&l, "c,,d", 2, msg, sizeof(msg)),
	    EGRESS_ERR_INVALID);
	cr_expect_eq(l.n, 2);
	conf_list_done(&l);
}
