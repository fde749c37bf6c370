/* SPDX-License-Identifier: ISC */
/*
 * The command-line tools' helpers: exit codes and the escaping of text an
 * upstream chose before it reaches a terminal.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <egress/egress.h>

#include "shim/tool.h"

static char *
escaped(const void *p, size_t n)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	cr_assert_not_null(f);
	tool_put_escaped(f, p, n);
	cr_assert_eq(fclose(f), 0);
	return buf;
}

Test(tool_put_escaped, printable_ascii_unchanged)
{
	char *s = escaped("going away: bye!", 16);

	cr_assert_str_eq(s, "going away: bye!");
	free(s);
}

Test(tool_put_escaped, terminal_controls_escaped)
{
	/* a title-setting and a colour sequence, a bell, CR, DEL */
	static const char in[] = "\x1b]0;pwned\x07\x1b[31mred\r\x7f";
	char *s = escaped(in, sizeof(in) - 1);

	cr_assert_str_eq(s, "\\x1b]0;pwned\\x07\\x1b[31mred\\x0d\\x7f");
	cr_assert_null(strchr(s, 0x1b));
	free(s);
}

Test(tool_put_escaped, high_bytes_nul_and_backslash_escaped)
{
	/* U+009B (a C1 CSI in UTF-8), a NUL inside, and a backslash, so an
	 * escaped text cannot be mistaken for the escape of another */
	static const unsigned char in[] = { 0xc2, 0x9b, 'a', 0x00, 'b', '\\',
		'x', '4', '1' };
	char *s = escaped(in, sizeof(in));

	cr_assert_str_eq(s, "\\xc2\\x9ba\\x00b\\\\x41");
	free(s);
}

Test(tool_put_escaped, empty_and_null)
{
	char *s = escaped(NULL, 0);

	cr_assert_str_eq(s, "");
	free(s);
}

Test(tool_exit_code, codes)
{
	cr_assert_eq(tool_exit_code(EGRESS_ERR_DENIED), 10);
	cr_assert_eq(tool_exit_code(EGRESS_ERR_TLS_FAILED), 14);
	cr_assert_eq(tool_exit_code(EGRESS_ERR_CANCELLED), 19);
	cr_assert_eq(tool_exit_code(12345), TOOL_EXIT_LOCAL);
}
