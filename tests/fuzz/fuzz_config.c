/* SPDX-License-Identifier: ISC */
/*
 * Fuzz target for the configuration parser: the input is a whole
 * configuration file given to conf_load_buffer(). Its folder does not
 * exist, so manifests and keys fail to open (that path is exercised too)
 * and no file outside is ever read or written. Any snapshot is walked and
 * freed; errors are freed.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "conf/conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors e = { 0 };
	size_t i;

	if (conf_load_buffer("/nonexistent/fuzz/egressd.ini",
		(const char *)data, size, &s, &e) == 0) {
		for (i = 0; i < s->ninstances; i++)
			(void)conf_instance_find(s, s->instances[i].name);
		for (i = 0; i < s->ntls_profiles; i++)
			(void)conf_tls_profile_find(s, s->tls_profiles[i].name,
			    strlen(s->tls_profiles[i].name));
		(void)conf_snapshot_is_stale(s);
	}
	conf_snapshot_free(s);
	conf_errors_done(&e);
	return 0;
}
