/* SPDX-License-Identifier: ISC */
/*
 * EVA harness: policy_entry_parse() on every text of 0 to TEXT_MAX bytes
 * of any content, with a public-suffix callback that reads its argument
 * as a string and answers any value, with and without reterr; then
 * policy_entry_format() on what it produced and on an entry of any bytes,
 * into a buffer of any size 0 to 300 and into buffers of exactly 1, 2, 3,
 * 46, 254, 255 and 256 bytes given their own size.
 * prove: sources policy/entry.c policy/url.c policy/host.c policy/inet.c
 */
#include "__fc_builtin.h"

#include <string.h>

#include "policy/policy.h"

/* Five times a configuration line (CONF_LINE_MAX). */
#define TEXT_MAX 1024

static char text[TEXT_MAX];
static char out[300];
static char b1[1], b2[2], b3[3], b46[46], b254[254], b255[255], b256[256];

static int
any_psl(void *ctx, const char *domain)
{
	(void)ctx;
	(void)strlen(domain);
	return Frama_C_interval(-1, 1);
}

static void
format_all(const struct policy_entry *e)
{
	(void)policy_entry_format(e, out, Frama_C_size_t_interval(0, 300));
	(void)policy_entry_format(e, b1, sizeof(b1));
	(void)policy_entry_format(e, b2, sizeof(b2));
	(void)policy_entry_format(e, b3, sizeof(b3));
	(void)policy_entry_format(e, b46, sizeof(b46));
	(void)policy_entry_format(e, b254, sizeof(b254));
	(void)policy_entry_format(e, b255, sizeof(b255));
	(void)policy_entry_format(e, b256, sizeof(b256));
}

int
main(void)
{
	struct policy_entry e;
	struct policy_err err;
	size_t len = Frama_C_size_t_interval(0, sizeof(text));

	Frama_C_make_unknown(text, sizeof(text));
	/* What the caller's entry held before: any bytes. */
	Frama_C_make_unknown((char *)&e, sizeof(e));
	if (policy_entry_parse(text, len, any_psl, NULL, &e, &err) == 0)
		format_all(&e);
	(void)policy_entry_parse(text, len, any_psl, NULL, &e, NULL);
	(void)policy_entry_parse(text, len, NULL, NULL, &e, &err);
	(void)policy_entry_parse(NULL, len, any_psl, NULL, &e, &err);
	Frama_C_make_unknown((char *)&e, sizeof(e));
	format_all(&e);
	(void)policy_entry_format(NULL, out, sizeof(out));
	(void)policy_entry_format(&e, NULL, 0);
	return 0;
}
