/* SPDX-License-Identifier: ISC */
/*
 * The public-suffix callback the entry grammar needs (policy/ stays
 * libc-only, so conf/ supplies it): libpsl's newest list on this system
 * (psl_latest), falling back to the list built into libpsl, consulted for
 * the ICANN section without the implicit "*" rule, so that "*.co.uk" is
 * refused and "*.s3.amazonaws.com" (a private-section suffix) is not. With
 * no list at all every domain counts as a public suffix: wildcards then
 * fail closed.
 */
#include <pthread.h>
#include <stddef.h>

#include <libpsl.h>

#include "conf/conf.h"

static pthread_once_t psl_once = PTHREAD_ONCE_INIT;
static const psl_ctx_t *psl_ctx;

static void
psl_init(void)
{
	const psl_ctx_t *p;

	/* Never freed: it lives as long as the process. */
	if ((p = psl_latest(NULL)) == NULL)
		p = psl_builtin();
	psl_ctx = p;
}

int
conf_psl_is_public_suffix(void *ctx, const char *domain)
{
	(void)ctx;
	(void)pthread_once(&psl_once, psl_init);
	if (psl_ctx == NULL || domain == NULL)
		return 1;
	return psl_is_public_suffix2(psl_ctx, domain,
		   PSL_TYPE_ICANN | PSL_TYPE_NO_STAR_RULE) ?
	    1 :
	    0;
}
