/* SPDX-License-Identifier: ISC */
/*
 * Fuzz target for the manifest parser, which reads untrusted package
 * input. The first byte picks the signature mode (low two bits) and
 * whether the input carries a signature (bit 2): then the bytes after the
 * first '\0' are the manifest.ini.sig text and the bytes before it the
 * manifest. No key is trusted, so a signature is at best untrusted.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "conf/conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum conf_sig_mode modes[4] = { CONF_SIG_DISABLED,
		CONF_SIG_PERMISSIVE, CONF_SIG_STRICT, CONF_SIG_PERMISSIVE };
	struct conf_manifest *m = NULL;
	struct conf_errors e = { 0 };
	const char *buf, *sig = NULL, *nul;
	size_t len, siglen = 0;
	uint8_t flags;

	if (size == 0)
		return 0;
	flags = data[0];
	buf = (const char *)data + 1;
	len = size - 1;
	if ((flags & 4) && (nul = memchr(buf, '\0', len)) != NULL) {
		sig = nul + 1;
		siglen = len - (size_t)(sig - buf);
		len = (size_t)(nul - buf);
	}
	if (conf_manifest_parse("fuzz/manifest.ini", buf, len, sig, siglen,
		modes[flags & 3], NULL, &m, &e) == 0)
		(void)policy_grant_count(m->hosts);
	conf_manifest_free(m);
	conf_errors_done(&e);
	return 0;
}
