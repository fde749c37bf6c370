/* SPDX-License-Identifier: ISC */
/*
 * Plugin manifests: manifest.ini ([plugin] name, version, permissions;
 * [egress] hosts, operator_defined) with its detached manifest.ini.sig.
 * A manifest is untrusted input: its size, host count and every string are
 * bounded and refused (never truncated) past the bound, every host goes
 * through the shared entry grammar, and the signature is checked over the
 * exact bytes parsed, under the operator's signature_mode.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "conf/confint.h"

static const struct conf_keydef plugin_keys[] = {
	{ "name", 0 },
	{ "version", 0 },
	{ "permissions", 1 },
	{ NULL, 0 },
};

static const struct conf_keydef egress_keys[] = {
	{ "hosts", 1 },
	{ "operator_defined", 0 },
	{ NULL, 0 },
};

struct mf_parse {
	struct conf_sec plugin;
	struct conf_sec egress;
	int have_plugin;
	int have_egress;
	int nomem;
};

static struct conf_sec *
mf_section(void *ctx, const char *path, const char *name, int line,
    struct conf_errors *errs)
{
	struct mf_parse *mp = ctx;
	struct conf_sec *sec;
	const struct conf_keydef *keys;
	int *have;

	if (strcmp(name, "plugin") == 0) {
		sec = &mp->plugin;
		keys = plugin_keys;
		have = &mp->have_plugin;
	} else if (strcmp(name, "egress") == 0) {
		sec = &mp->egress;
		keys = egress_keys;
		have = &mp->have_egress;
	} else {
		conf_errors_addf(errs,
		    "%s:%d: [%s]: unknown section; a "
		    "manifest has [plugin] and [egress]",
		    path, line, name);
		return NULL;
	}
	if (conf_sec_init(sec, name, line, keys) != 0) {
		mp->nomem = 1;
		return NULL;
	}
	*have = 1;
	return sec;
}

int
conf_name_is_valid(const char *s, int upper)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > CONF_NAME_MAX || strstr(s, "..") != NULL)
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];
		int alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    (upper && c >= 'A' && c <= 'Z');

		if (alnum)
			continue;
		if (i == 0)
			return 0;
		if (c != '.' && c != '_' && c != '-' && !(upper && c == '+') &&
		    !(upper && c == '~'))
			return 0;
	}
	return 1;
}

int
conf_permissions_parse(const char *path, const char *section,
    const struct conf_list *l, unsigned *ret, struct conf_errors *errs)
{
	unsigned bits = 0;
	size_t i;
	int b, bad = 0;

	for (i = 0; i < l->n; i++) {
		b = policy_permission_parse(l->v[i].s, strlen(l->v[i].s));
		if (b <= 0) {
			conf_errors_addf(errs,
			    "%s:%d: [%s] permissions: "
			    "unknown permission '%s'; write http_client, "
			    "websocket_client or socket_client",
			    path, l->v[i].line, section, l->v[i].s);
			bad = 1;
			continue;
		}
		bits |= (unsigned)b;
	}
	if (bad)
		return EGRESS_ERR_INVALID;
	*ret = bits;
	return 0;
}

int
conf_grant_parse(const char *path, const char *section, const char *key,
    const struct conf_list *l, struct policy_grant **ret,
    struct conf_errors *errs)
{
	struct policy_grant *g;
	struct policy_entry e;
	struct policy_err err;
	size_t i;
	int bad = 0;

	if ((g = policy_grant_new()) == NULL)
		return EGRESS_ERR_NOMEM;
	for (i = 0; i < l->n; i++) {
		memset(&err, 0, sizeof(err));
		if (policy_entry_parse(l->v[i].s, strlen(l->v[i].s),
			conf_psl_is_public_suffix, NULL, &e, &err) != 0) {
			char alabel[POLICY_NAME_MAX + 3];

			if (conf_idn_suggest(l->v[i].s, alabel,
				sizeof(alabel)) == 0)
				conf_errors_addf(errs,
				    "%s:%d: [%s] %s: '%s': "
				    "not an A-label name; write '%s'",
				    path, l->v[i].line, section, key,
				    l->v[i].s, alabel);
			else
				conf_errors_addf(errs,
				    "%s:%d: [%s] %s: '%s': "
				    "%s",
				    path, l->v[i].line, section, key,
				    l->v[i].s,
				    err.msg[0] ? err.msg : "invalid entry");
			bad = 1;
			continue;
		}
		if (policy_grant_add(g, &e) != 0) {
			policy_grant_free(g);
			return EGRESS_ERR_NOMEM;
		}
	}
	if (bad) {
		policy_grant_free(g);
		return EGRESS_ERR_INVALID;
	}
	*ret = g;
	return 0;
}

void
conf_manifest_free(struct conf_manifest *m)
{
	if (m == NULL)
		return;
	free(m->path);
	free(m->name);
	free(m->version);
	policy_grant_free(m->hosts);
	free(m);
}

enum sig_input {
	SIG_NONE = 0, /* no manifest.ini.sig */
	SIG_GIVEN = 1,
	SIG_BROKEN = 2, /* exists but unreadable or over the bound */
};

static int
check_signature(const char *path, const char *buf, size_t len, const char *sig,
    size_t siglen, enum sig_input sigin, enum conf_sig_mode mode,
    const struct conf_keyring *keys, enum conf_sig_status *ret, char *signer,
    struct conf_errors *errs)
{
	enum conf_sig_status st;
	const char *mname;

	if (mode == CONF_SIG_DISABLED) {
		*ret = CONF_SIG_NOT_CHECKED;
		return 0;
	}
	if (mode != CONF_SIG_PERMISSIVE && mode != CONF_SIG_STRICT)
		return conf_errors_addf(errs, "%s: unknown signature_mode %d",
		    path, (int)mode);
	mname = mode == CONF_SIG_STRICT ? "strict" : "permissive";
	if (sigin == SIG_BROKEN)
		st = CONF_SIG_INVALID;
	else
		st = conf_sig_verify_by(buf, len,
		    sigin == SIG_GIVEN ? sig : NULL, siglen, keys, signer);
	*ret = st;
	switch (st) {
	case CONF_SIG_VALID:
		return 0;
	case CONF_SIG_UNSIGNED:
		if (mode == CONF_SIG_PERMISSIVE)
			return 0;
		return conf_errors_addf(errs,
		    "%s: unsigned (no %s.sig), and "
		    "signature_mode = strict accepts only a valid signature "
		    "by a trusted key",
		    path, path);
	case CONF_SIG_INVALID:
		return conf_errors_addf(errs,
		    "%s.sig: invalid signature "
		    "file: it must hold one line of base64 of a %d-byte "
		    "Ed25519 signature (signature_mode = %s)",
		    path, CONF_SIG_LEN, mname);
	case CONF_SIG_UNTRUSTED:
	default:
		return conf_errors_addf(errs,
		    "%s.sig: untrusted signature: "
		    "no trusted key verifies these manifest bytes (a "
		    "changed manifest or an unknown key; signature_mode = "
		    "%s)",
		    path, mname);
	}
}

/* The [egress] section: declared hosts and operator_defined. Return 0,
 * or EGRESS_ERR_NOMEM (problems are added to errs). */
static int
mf_egress(const char *path, struct mf_parse *mp, struct conf_manifest *m,
    struct conf_errors *errs)
{
	const struct conf_val *v;
	int r;

	v = conf_sec_cval(&mp->egress, "hosts");
	if (v->list.n > CONF_MANIFEST_HOSTS_MAX) {
		conf_errors_addf(errs,
		    "%s:%d: [egress] hosts: %zu "
		    "hosts; a manifest may declare at most %d",
		    path, v->line, v->list.n, CONF_MANIFEST_HOSTS_MAX);
	} else {
		r = conf_grant_parse(path, "egress", "hosts", &v->list,
		    &m->hosts, errs);
		if (r == EGRESS_ERR_NOMEM)
			return r;
	}
	v = conf_sec_cval(&mp->egress, "operator_defined");
	if (v->str != NULL && strcmp(v->str, "true") == 0)
		m->operator_defined = 1;
	else if (v->str != NULL && strcmp(v->str, "false") != 0)
		conf_errors_addf(errs,
		    "%s:%d: [egress] "
		    "operator_defined: '%s'; write true or false",
		    path, v->line, v->str);
	return 0;
}

static int
manifest_parse(const char *path, const char *buf, size_t len, const char *sig,
    size_t siglen, enum sig_input sigin, enum conf_sig_mode mode,
    const struct conf_keyring *keys, struct conf_manifest **ret,
    struct conf_errors *reterr)
{
	struct mf_parse mp;
	struct conf_manifest *m = NULL;
	struct conf_errors errs = { 0 };
	const struct conf_val *v;
	enum conf_sig_status st = CONF_SIG_NOT_CHECKED;
	int r, rc = EGRESS_ERR_INVALID;

	memset(&mp, 0, sizeof(mp));
	if (len > CONF_MANIFEST_MAX) {
		conf_errors_addf(reterr,
		    "%s: manifest is %zu bytes; at most "
		    "%d are allowed",
		    path, len, CONF_MANIFEST_MAX);
		return EGRESS_ERR_TOO_BIG;
	}
	if ((m = calloc(1, sizeof(*m))) == NULL ||
	    (m->path = strdup(path)) == NULL) {
		rc = EGRESS_ERR_NOMEM;
		goto out;
	}
	r = conf_ini_parse(path, buf, len, mf_section, &mp, &errs);
	if (r == EGRESS_ERR_NOMEM || mp.nomem) {
		rc = EGRESS_ERR_NOMEM;
		goto out;
	}

	if (!mp.have_plugin) {
		conf_errors_addf(&errs,
		    "%s:1: [plugin]: missing section; a "
		    "manifest starts with [plugin] and its name and version",
		    path);
	} else {
		v = conf_sec_cval(&mp.plugin, "name");
		if (v->line == 0)
			conf_errors_addf(&errs,
			    "%s:%d: [plugin] name: "
			    "missing; add 'name = PLUGIN'",
			    path, mp.plugin.line);
		else if (v->str != NULL && !conf_name_is_valid(v->str, 0))
			conf_errors_addf(&errs,
			    "%s:%d: [plugin] name: '%s' "
			    "is not a plugin name: 1 to %d bytes of a-z, 0-9, "
			    "'.', '_', '-', starting with a letter or digit, "
			    "without '..'",
			    path, v->line, v->str, CONF_NAME_MAX);
		else if (v->str != NULL && (m->name = strdup(v->str)) == NULL)
			mp.nomem = 1;
		m->name_line = v->line;
		v = conf_sec_cval(&mp.plugin, "version");
		if (v->line == 0)
			conf_errors_addf(&errs,
			    "%s:%d: [plugin] version: "
			    "missing; add 'version = 1.0.0'",
			    path, mp.plugin.line);
		else if (v->str != NULL && !conf_name_is_valid(v->str, 1))
			conf_errors_addf(&errs,
			    "%s:%d: [plugin] version: "
			    "'%s' is not a version: 1 to %d bytes of letters, "
			    "digits, '.', '_', '-', '+', '~', starting with a "
			    "letter or digit, without '..'",
			    path, v->line, v->str, CONF_NAME_MAX);
		else if (v->str != NULL &&
		    (m->version = strdup(v->str)) == NULL)
			mp.nomem = 1;
		v = conf_sec_cval(&mp.plugin, "permissions");
		(void)conf_permissions_parse(path, "plugin", &v->list,
		    &m->permissions, &errs);
	}

	if (mp.have_egress &&
	    mf_egress(path, &mp, m, &errs) == EGRESS_ERR_NOMEM) {
		rc = EGRESS_ERR_NOMEM;
		goto out;
	}
	if (m->hosts == NULL && (m->hosts = policy_grant_new()) == NULL)
		mp.nomem = 1;
	if (mp.nomem) {
		rc = EGRESS_ERR_NOMEM;
		goto out;
	}

	(void)check_signature(path, buf, len, sig, siglen, sigin, mode, keys,
	    &st, m->signer, &errs);
	m->sig = st;
	if (errs.n > 0) {
		rc = EGRESS_ERR_INVALID;
		goto out;
	}
	if (EVP_Digest(buf, len, m->sha256, NULL, EVP_sha256(), NULL) != 1) {
		rc = EGRESS_ERR_NOMEM;
		goto out;
	}
	*ret = m;
	m = NULL;
	rc = 0;
out:
	if (rc == EGRESS_ERR_NOMEM)
		conf_errors_addf(&errs, "%s: out of memory", path);
	conf_errors_move(reterr, &errs);
	conf_sec_done(&mp.plugin);
	conf_sec_done(&mp.egress);
	conf_manifest_free(m);
	return rc;
}

int
conf_manifest_parse(const char *path, const char *buf, size_t len,
    const char *sig, size_t siglen, enum conf_sig_mode mode,
    const struct conf_keyring *keys, struct conf_manifest **ret,
    struct conf_errors *reterr)
{
	return manifest_parse(path, buf, len, sig, siglen,
	    sig != NULL ? SIG_GIVEN : SIG_NONE, mode, keys, ret, reterr);
}

int
conf_manifest_load_ids(const char *path, enum conf_sig_mode mode,
    const struct conf_keyring *keys, struct conf_manifest **ret,
    struct conf_errors *reterr, struct conf_file_id ids[2])
{
	char *buf = NULL, *sig = NULL, *sigpath = NULL;
	size_t len = 0, siglen = 0;
	enum sig_input sigin = SIG_NONE;
	int r, rc;

	memset(ids, 0, 2 * sizeof(*ids));
	if ((ids[0].path = strdup(path)) == NULL ||
	    asprintf(&sigpath, "%s.sig", path) < 0) {
		sigpath = NULL;
		rc = EGRESS_ERR_NOMEM;
		goto out;
	}
	if ((ids[1].path = strdup(sigpath)) == NULL) {
		rc = EGRESS_ERR_NOMEM;
		goto out;
	}
	/* The signature first: a .sig written between the two reads then
	 * fails to verify rather than passing over older bytes. */
	if (mode == CONF_SIG_DISABLED) {
		(void)conf_file_id_stat(sigpath, &ids[1]);
	} else {
		r = conf_read_file(sigpath, CONF_SIG_FILE_MAX, &sig, &siglen,
		    &ids[1]);
		if (r == EGRESS_ERR_NOMEM) {
			rc = r;
			goto out;
		}
		if (r == 0)
			sigin = SIG_GIVEN;
		else if (r != EGRESS_ERR_NOT_FOUND)
			sigin = SIG_BROKEN;
	}
	r = conf_read_file(path, CONF_MANIFEST_MAX, &buf, &len, &ids[0]);
	if (r == EGRESS_ERR_NOT_FOUND) {
		rc = conf_errors_addf(reterr, "%s: no such manifest", path);
		goto out;
	}
	if (r == EGRESS_ERR_TOO_BIG) {
		conf_errors_addf(reterr,
		    "%s: manifest is over %d bytes; at "
		    "most %d are allowed",
		    path, CONF_MANIFEST_MAX, CONF_MANIFEST_MAX);
		rc = r;
		goto out;
	}
	if (r == EGRESS_ERR_NOMEM) {
		rc = r;
		goto out;
	}
	if (r != 0) {
		conf_errors_addf(reterr, "%s: cannot read the manifest: %s",
		    path, strerror(errno));
		rc = r;
		goto out;
	}
	rc = manifest_parse(path, buf, len, sig, siglen, sigin, mode, keys,
	    ret, reterr);
out:
	free(buf);
	free(sig);
	free(sigpath);
	return rc;
}

int
conf_manifest_load(const char *path, enum conf_sig_mode mode,
    const struct conf_keyring *keys, struct conf_manifest **ret,
    struct conf_errors *reterr)
{
	struct conf_file_id ids[2];
	int rc;

	rc = conf_manifest_load_ids(path, mode, keys, ret, reterr, ids);
	free(ids[0].path);
	free(ids[1].path);
	return rc;
}
