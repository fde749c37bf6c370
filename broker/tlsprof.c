/* SPDX-License-Identifier: ISC */
/*
 * The TLS client contexts of the [tls.profiles.NAME] sections (see
 * tlsprof.h): one per profile, rebuilt when the profile or a file it
 * names changed, and the selection of a request's context.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <egress/error.h>

#include "broker/broker.h"
#include "broker/log.h"
#include "broker/net/dial.h"
#include "broker/tlsprof.h"
#include "conf/conf.h"

/* Profile generations never meet the [tls] context's (b->tls_gen). */
#define TLSPROF_GEN_BASE (1ULL << 62)

struct broker_tlsprof {
	char *name;
	struct dial_tls *tls; /* NULL: failed to load */
	uint64_t gen;
	/* What it was built from. */
	char *path[3]; /* the effective CA file (NULL: system), cert, key */
	struct broker_file_id id[3];
	/* The SHA-256 of each as the configuration read it (a rewrite that
	 * keeps every stat field, within one timestamp tick, still shows). */
	unsigned char digest[3][32];
	int min_version;
	unsigned char alpn[CONF_ALPN_WIRE_MAX];
	size_t alpn_len;
};

static void
tp_free(struct broker_tlsprof *p)
{
	size_t i;

	dial_tls_free(p->tls);
	free(p->name);
	for (i = 0; i < 3; i++)
		free(p->path[i]);
	memset(p, 0, sizeof(*p));
}

static int
str_same(const char *a, const char *b)
{
	return (a == NULL && b == NULL) ||
	    (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* The digest of path as snapshot s read it (zeros when it did not). */
static void
tp_digest(const struct conf_snapshot *s, const char *path,
    unsigned char ret[32])
{
	size_t i;

	memset(ret, 0, 32);
	for (i = 0; path != NULL && i < s->nfiles; i++)
		if (s->files[i].has_digest &&
		    strcmp(s->files[i].path, path) == 0)
			memcpy(ret, s->files[i].digest, 32);
}

/* Is old still what profile c of s would build? */
static int
tp_same(const struct broker_tlsprof *old, const char *const path[3],
    const struct broker_file_id id[3], unsigned char digest[3][32],
    const struct conf_tls_profile *c)
{
	size_t i;

	if (old->tls == NULL || old->min_version != c->min_version ||
	    old->alpn_len != c->alpn_len ||
	    memcmp(old->alpn, c->alpn, c->alpn_len) != 0)
		return 0;
	for (i = 0; i < 3; i++)
		if (!str_same(old->path[i], path[i]) ||
		    (path[i] != NULL &&
			(!broker_file_id_eq(&old->id[i], &id[i]) ||
			    memcmp(old->digest[i], digest[i], 32) != 0)))
			return 0;
	return 1;
}

static void
tp_log_problem(const char *name, int err)
{
	json_t *o;

	o = json_pack("{s:s, s:s, s:s, s:s}", "status", "error", "what",
	    "tls profile", "profile", name, "detail", egress_strerror(err));
	if (o != NULL)
		log_event("egress.broker", o);
}

/* Build the context of profile c into *p (old: the previous one of that
 * name, or NULL). */
static int
tp_build(struct broker *b, const struct conf_snapshot *s,
    const struct conf_tls_profile *c, struct broker_tlsprof *old,
    struct broker_tlsprof *p)
{
	const char *path[3];
	struct broker_file_id id[3];
	unsigned char digest[3][32];
	struct dial_tls_conf dc;
	size_t i;
	int err;

	path[0] = c->ca_file != NULL ? c->ca_file : s->ca_file;
	path[1] = c->cert_file;
	path[2] = c->key_file;
	/* Taken before loading: a rewrite during the load shows next time. */
	for (i = 0; i < 3; i++) {
		broker_file_id(path[i], &id[i]);
		tp_digest(s, path[i], digest[i]);
	}
	if (old != NULL && tp_same(old, path, id, digest, c)) {
		*p = *old;
		memset(old, 0, sizeof(*old));
		return 0;
	}
	memset(p, 0, sizeof(*p));
	if ((p->name = strdup(c->name)) == NULL)
		return EGRESS_ERR_NOMEM;
	for (i = 0; i < 3; i++) {
		if (path[i] != NULL && (p->path[i] = strdup(path[i])) == NULL)
			return EGRESS_ERR_NOMEM;
		p->id[i] = id[i];
		memcpy(p->digest[i], digest[i], 32);
	}
	p->min_version = c->min_version;
	memcpy(p->alpn, c->alpn, c->alpn_len);
	p->alpn_len = c->alpn_len;
	p->gen = TLSPROF_GEN_BASE + ++b->tlsprof_seq;
	memset(&dc, 0, sizeof(dc));
	dc.ca_file = path[0];
	dc.cert_file = path[1];
	dc.key = c->key;
	dc.min_version = c->min_version;
	dc.alpn = c->alpn;
	dc.alpn_len = c->alpn_len;
	if ((err = dial_tls_new_conf(&dc, &p->tls)) != 0) {
		p->tls = NULL;
		tp_log_problem(c->name, err);
	}
	return err;
}

int
tlsprof_apply(struct broker *b, const struct conf_snapshot *s)
{
	struct broker_tlsprof *v = NULL;
	size_t i, j, n = 0;
	int err, ret = 0;

	if (s->ntls_profiles > 0 &&
	    (v = calloc(s->ntls_profiles, sizeof(*v))) == NULL)
		return EGRESS_ERR_NOMEM;
	for (i = 0; i < s->ntls_profiles; i++) {
		const struct conf_tls_profile *c = &s->tls_profiles[i];
		struct broker_tlsprof *old = NULL;

		for (j = 0; j < b->ntlsprofs; j++)
			if (b->tlsprofs[j].name != NULL &&
			    strcmp(b->tlsprofs[j].name, c->name) == 0)
				old = &b->tlsprofs[j];
		err = tp_build(b, s, c, old, &v[n]);
		n++;
		if (err != 0 && ret == 0)
			ret = err;
	}
	tlsprof_release(b);
	b->tlsprofs = v;
	b->ntlsprofs = n;
	return ret;
}

int
tlsprof_check(const struct conf_snapshot *s, const struct conf_instance *ci,
    const char *name, size_t len)
{
	if (len == 0)
		return 0;
	if (ci == NULL || !conf_instance_has_tls_profile(ci, name, len) ||
	    conf_tls_profile_find(s, name, len) == NULL)
		return EGRESS_ERR_INVALID_REQUEST;
	return 0;
}

int
tlsprof_select(struct broker *b, const struct conf_snapshot *s,
    const struct conf_instance *ci, const char *name, size_t len,
    struct dial_tls **ret_tls, uint64_t *ret_trust)
{
	size_t i;
	int err;

	if ((err = tlsprof_check(s, ci, name, len)) != 0)
		return err;
	if (len == 0) {
		if (b->tls == NULL || !b->tls_ok)
			return EGRESS_ERR_TLS_FAILED;
		*ret_tls = b->tls;
		*ret_trust = b->tls_gen;
		return 0;
	}
	for (i = 0; i < b->ntlsprofs; i++) {
		const struct broker_tlsprof *p = &b->tlsprofs[i];

		if (p->name == NULL || strlen(p->name) != len ||
		    memcmp(p->name, name, len) != 0)
			continue;
		if (p->tls == NULL)
			return EGRESS_ERR_TLS_FAILED;
		*ret_tls = p->tls;
		*ret_trust = p->gen;
		return 0;
	}
	return EGRESS_ERR_TLS_FAILED;
}

int
tlsprof_trust_is_current(const struct broker *b, uint64_t trust)
{
	size_t i;

	if (b->tls != NULL && b->tls_ok && trust == b->tls_gen)
		return 1;
	for (i = 0; i < b->ntlsprofs; i++)
		if (b->tlsprofs[i].tls != NULL && b->tlsprofs[i].gen == trust)
			return 1;
	return 0;
}

void
tlsprof_release(struct broker *b)
{
	size_t i;

	for (i = 0; i < b->ntlsprofs; i++)
		tp_free(&b->tlsprofs[i]);
	free(b->tlsprofs);
	b->tlsprofs = NULL;
	b->ntlsprofs = 0;
}
