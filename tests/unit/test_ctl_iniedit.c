/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for broker/iniedit: every edit changes only the lines of the
 * key or section it names and keeps every other byte (comments, blank
 * lines, inline comments, continuation lines, CRLF, a missing final
 * newline), lists wrap on continuation lines within the line limit, and
 * the atomic replacement keeps the file's mode and leaves no temporary
 * file behind. Table-driven: input, one operation, exact expected output.
 */
#include <sys/stat.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <egress/error.h>

#include "broker/ctl/iniedit.h"

enum op {
	OP_SET = 1,
	OP_LIST,
	OP_ADD,
	OP_REMOVE,
};

struct edit_case {
	char name[48];
	enum op op;
	char section[48];
	char key[32];
	char value[400]; /* OP_SET value; OP_LIST items, space-separated */
	int want_rc;
	char in[800];
	char out[1200];
};

static struct edit_case edit_cases[] = {
	{ "set keeps spacing and inline comment", OP_SET, "s", "k", "new", 0,
	    "; top\n[s]\nk   =  old   ; why\nj = 1\n",
	    "; top\n[s]\nk   =  new   ; why\nj = 1\n" },
	{ "set appends after the last key", OP_SET, "s", "n", "v", 0,
	    "[s]\na = 1\n\n; about t\n[t]\nb = 2\n",
	    "[s]\na = 1\nn = v\n\n; about t\n[t]\nb = 2\n" },
	{ "set on an empty section", OP_SET, "s", "n", "v", 0, "[s]\n[t]\n",
	    "[s]\nn = v\n[t]\n" },
	{ "set without final newline", OP_SET, "s", "n", "v", 0, "[s]\na = 1",
	    "[s]\na = 1\nn = v\n" },
	{ "set in a missing section", OP_SET, "x", "n", "v",
	    EGRESS_ERR_NOT_FOUND, "[s]\n", "[s]\n" },
	{ "set keeps CRLF", OP_SET, "s", "a", "2", 0,
	    "[s]\r\na = 1\r\nb = 3\r\n", "[s]\r\na = 2\r\nb = 3\r\n" },
	{ "set only in its own section", OP_SET, "t", "a", "9", 0,
	    "[s]\na = 1\n[t]\na = 2\n", "[s]\na = 1\n[t]\na = 9\n" },
	{ "set empty value has no trailing blank", OP_SET, "s", "a", "", 0,
	    "[s]\na = 1\n", "[s]\na =\n" },
	{ "list replaces continuation lines", OP_LIST, "s", "h", "x.example",
	    0, "[s]\nh = a.example\n    b.example ; c\n  c.example\nz = 1\n",
	    "[s]\nh = x.example\n; c\nz = 1\n" },
	{ "list keeps comments inside its span", OP_LIST, "s", "h",
	    "a.example b.example", 0,
	    "[s]\nh = a.example\n; note\n    c.example\nz = 1\n",
	    "[s]\nh = a.example, b.example\n; note\nz = 1\n" },
	{ "list merges repeated keys", OP_LIST, "s", "h", "a.example", 0,
	    "[s]\nh = b.example\nz = 1\nh = c.example\n",
	    "[s]\nh = a.example\nz = 1\n" },
	{ "list empty", OP_LIST, "s", "h", "", 0,
	    "[s]\nh = a.example ; keep\n", "[s]\n; keep\nh =\n" },
	{ "list new key", OP_LIST, "s", "h", "a.example *.b.example", 0,
	    "[s]\nplugin = p\n\n",
	    "[s]\nplugin = p\nh = a.example, *.b.example\n\n" },
	{ "list wraps long lists aligned", OP_LIST, "s", "egress_hosts",
	    "aaaaaaaaaaaaaaaa.example bbbbbbbbbbbbbbbbbbbb.example "
	    "cccccccccccccccccc.example",
	    0, "[s]\negress_hosts = a\n",
	    "[s]\negress_hosts = aaaaaaaaaaaaaaaa.example\n"
	    "               bbbbbbbbbbbbbbbbbbbb.example\n"
	    "               cccccccccccccccccc.example\n" },
	{ "list refuses a comma", OP_LIST, "s", "h", "a,b", EGRESS_ERR_INVALID,
	    "[s]\n", "[s]\n" },
	{ "list refuses a comment start", OP_LIST, "s", "h", ";x",
	    EGRESS_ERR_INVALID, "[s]\n", "[s]\n" },
	{ "indented comment is not a continuation", OP_LIST, "s", "h", "n", 0,
	    "[s]\nh = a\n  ; indented comment\nz = 1\n",
	    "[s]\nh = n\n  ; indented comment\nz = 1\n" },
	{ "add section after a blank line", OP_ADD, "plugins.entries.w", "",
	    "", 0, "; c\n[s]\na = 1\n",
	    "; c\n[s]\na = 1\n\n[plugins.entries.w]\n" },
	{ "add section to a file without final newline", OP_ADD, "n", "", "",
	    0, "[s]\na = 1", "[s]\na = 1\n\n[n]\n" },
	{ "add section that exists", OP_ADD, "s", "", "", EGRESS_ERR_EXISTS,
	    "[s]\n", "[s]\n" },
	{ "add section refuses ]", OP_ADD, "a]b", "", "", EGRESS_ERR_INVALID,
	    "[s]\n", "[s]\n" },
	{ "add section to an empty file", OP_ADD, "n", "", "", 0, "",
	    "[n]\n" },
	{ "remove middle section with its comment", OP_REMOVE, "b", "", "", 0,
	    "[a]\nx = 1\n\n; about b\n[b]\ny = 2\n  z\n\n; about c\n[c]\nw = 3\n",
	    "[a]\nx = 1\n\n; about c\n[c]\nw = 3\n" },
	{ "remove last section", OP_REMOVE, "c", "", "", 0,
	    "[a]\nx = 1\n\n[c]\nw = 3\n", "[a]\nx = 1\n" },
	{ "remove keeps a detached comment", OP_REMOVE, "b", "", "", 0,
	    "[a]\nx = 1\n; detached\n\n[b]\ny = 2\n; trailing\n",
	    "[a]\nx = 1\n; detached\n\n; trailing\n" },
	{ "remove first section", OP_REMOVE, "a", "", "", 0,
	    "[a]\nx = 1\n\n[b]\ny = 2\n", "[b]\ny = 2\n" },
	{ "remove missing", OP_REMOVE, "q", "", "", EGRESS_ERR_NOT_FOUND,
	    "[a]\n", "[a]\n" },
	{ "remove every duplicate", OP_REMOVE, "a", "", "", 0,
	    "[a]\nx = 1\n[b]\ny = 2\n[a]\nz = 3\n", "[b]\ny = 2\n" },
};

ParameterizedTestParameters(iniedit, edits)
{
	return cr_make_param_array(struct edit_case, edit_cases,
	    sizeof(edit_cases) / sizeof(edit_cases[0]));
}

ParameterizedTest(struct edit_case *c, iniedit, edits)
{
	struct iniedit *d = NULL;
	char *out = NULL, items[400], *save = NULL, *tok;
	const char *v[16];
	size_t len = 0, n = 0;
	int rc = -1;

	cr_assert_eq(iniedit_parse(c->in, strlen(c->in), &d), 0);
	switch (c->op) {
	case OP_SET:
		rc = iniedit_set(d, c->section, c->key, c->value);
		break;
	case OP_LIST:
		memcpy(items, c->value, sizeof(items));
		for (tok = strtok_r(items, " ", &save); tok != NULL && n < 16;
		     tok = strtok_r(NULL, " ", &save))
			v[n++] = tok;
		rc = iniedit_set_list(d, c->section, c->key, v, n);
		break;
	case OP_ADD:
		rc = iniedit_section_add(d, c->section);
		break;
	case OP_REMOVE:
		rc = iniedit_section_remove(d, c->section);
		break;
	}
	cr_assert_eq(rc, c->want_rc, "%s: rc %d, want %d", c->name, rc,
	    c->want_rc);
	cr_assert_eq(iniedit_render(d, &out, &len), 0);
	cr_assert_str_eq(out, c->out, "%s:\n--- got\n%s--- want\n%s", c->name,
	    out, c->out);
	cr_assert_eq(len, strlen(c->out));
	free(out);
	iniedit_free(d);
}

Test(iniedit, roundtrip_is_identity)
{
	static const char in[] = "\xEF\xBB\xBF; bom\r\n[a]\nx=1\n  y\n\n"
				 "garbage line\n[b\n#c\nlast";
	struct iniedit *d = NULL;
	char *out = NULL;
	size_t len = 0;

	cr_assert_eq(iniedit_parse(in, sizeof(in) - 1, &d), 0);
	cr_assert_eq(iniedit_render(d, &out, &len), 0);
	cr_assert_eq(len, sizeof(in) - 1);
	cr_assert_eq(memcmp(out, in, len), 0);
	cr_assert(iniedit_section_exists(d, "a"));
	cr_assert(!iniedit_section_exists(d, "b"));
	free(out);
	iniedit_free(d);
}

Test(iniedit, over_long_line_refused)
{
	struct iniedit *d = NULL;
	char value[INIEDIT_LINE_MAX + 10];

	memset(value, 'a', sizeof(value) - 1);
	value[sizeof(value) - 1] = '\0';
	cr_assert_eq(iniedit_parse("[s]\n", 4, &d), 0);
	cr_assert_eq(iniedit_set(d, "s", "k", value), EGRESS_ERR_TOO_BIG);
	cr_assert_eq(iniedit_set(d, "s", "k", "a\nb"), EGRESS_ERR_INVALID);
	iniedit_free(d);
}

Test(iniedit, long_items_wrap_within_limit)
{
	struct iniedit *d = NULL;
	char a[190], b[190], *out = NULL, *line, *save = NULL;
	const char *v[2] = { a, b };
	size_t len;

	memset(a, 'a', sizeof(a) - 1);
	a[sizeof(a) - 1] = '\0';
	memset(b, 'b', sizeof(b) - 1);
	b[sizeof(b) - 1] = '\0';
	cr_assert_eq(iniedit_parse("[s]\n", 4, &d), 0);
	cr_assert_eq(iniedit_set_list(d, "s", "egress_allow_private", v, 2),
	    0);
	cr_assert_eq(iniedit_render(d, &out, &len), 0);
	for (line = strtok_r(out, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save))
		cr_assert_leq(strlen(line), INIEDIT_LINE_MAX, "%s", line);
	free(out);
	iniedit_free(d);
}

Test(iniedit, replace_keeps_mode_and_leaves_no_temp)
{
	char dir[] = "/tmp/iniedit-test.XXXXXX", path[128], err[256];
	struct iniedit_file f;
	struct stat st;
	FILE *fp;
	char buf[64];
	size_t n;

	cr_assert_not_null(mkdtemp(dir));
	(void)snprintf(path, sizeof(path), "%s/egressd.ini", dir);
	fp = fopen(path, "w");
	cr_assert_not_null(fp);
	fputs("[s]\na = 1\n", fp);
	(void)fclose(fp);
	cr_assert_eq(chmod(path, 0640), 0);
	cr_assert_eq(iniedit_file_open(path, &f, err, sizeof(err)), 0, "%s",
	    err);
	cr_assert_eq(f.len, 10);
	cr_assert_eq(iniedit_file_replace(&f, "[s]\na = 2\n", 10, err,
			 sizeof(err)),
	    0, "%s", err);
	iniedit_file_close(&f);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0640);
	fp = fopen(path, "r");
	cr_assert_not_null(fp);
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	(void)fclose(fp);
	buf[n] = '\0';
	cr_assert_str_eq(buf, "[s]\na = 2\n");
	(void)snprintf(buf, sizeof(buf), "rm -r -- '%s'", dir);
	/* Only the file and its lock remain. */
	{
		char cmd[256];
		int count;

		(void)snprintf(cmd, sizeof(cmd),
		    "test $(ls -A '%s' | wc -l) "
		    "-eq 2",
		    dir);
		// NOLINTNEXTLINE(cert-env33-c): the test runs its own shell command
		count = system(cmd);
		cr_assert_eq(count, 0, "a temporary file was left behind");
	}
	// NOLINTNEXTLINE(cert-env33-c): the test runs its own shell command
	cr_assert_eq(system(buf), 0);
}

Test(iniedit, open_missing_file_fails)
{
	struct iniedit_file f;
	char err[256] = "";

	cr_assert_lt(iniedit_file_open("/nonexistent-dir/x.ini", &f, err,
			 sizeof(err)),
	    0);
	cr_assert_neq(err[0], '\0');
	iniedit_file_close(&f);
}
