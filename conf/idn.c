/* SPDX-License-Identifier: ISC */
/*
 * The A-label spelling of an internationalised entry, for error messages.
 * Entries must already be canonical, so a U-label entry is refused; this
 * computes what the operator should write instead (IDNA 2008 with
 * non-transitional processing, via libidn2, which libpsl already uses).
 * It never changes what is accepted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <idn2.h>

#include "conf/confint.h"

int
conf_idn_suggest(const char *item, char *buf, size_t n)
{
	const char *name = item, *prefix = "";
	char *out = NULL;
	size_t i;
	int rc = -1, len;

	for (i = 0; item[i] != '\0'; i++)
		if ((unsigned char)item[i] >= 0x80)
			break;
	if (item[i] == '\0')
		return -1; /* ASCII: nothing to suggest */
	if (strncmp(item, "*.", 2) == 0) {
		name = item + 2;
		prefix = "*.";
	}
	if (idn2_to_ascii_8z(name, &out,
		IDN2_NONTRANSITIONAL | IDN2_NFC_INPUT) != IDN2_OK)
		goto out;
	len = snprintf(buf, n, "%s%s", prefix, out);
	if (len < 0 || (size_t)len >= n)
		goto out;
	rc = 0;
out:
	idn2_free(out);
	return rc;
}
