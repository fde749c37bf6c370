/* SPDX-License-Identifier: ISC */
/*
 * The inspection CA that entries with tls_inspect = true are terminated
 * with: where its two files are ([tls] inspect_ca_cert and inspect_ca_key,
 * or their defaults in the configuration's folder), and the checks a load
 * makes of them (a CA certificate, an owner-only unencrypted key that
 * matches it). The key's bytes are wiped once parsed and never appear in
 * a message.
 */
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <egress/error.h>

#include "conf/confint.h"

#define CA_FILE_MAX (64 * 1024) /* bytes of either file */

static int
no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1;
}

static const char *
read_cert(const char *path, X509 **ret)
{
	struct conf_file_id id = { 0 };
	const char *why = NULL;
	char *buf = NULL;
	size_t len = 0;
	BIO *bio = NULL;
	X509 *x = NULL;
	int rc;

	if ((rc = conf_read_file(path, CA_FILE_MAX, &buf, &len, &id)) != 0)
		return rc == EGRESS_ERR_NOT_FOUND ?
		    "does not exist; egressctl ca init writes it" :
		    rc == EGRESS_ERR_TOO_BIG ? "is larger than 64 KiB" :
		    rc == EGRESS_ERR_NOMEM   ? "out of memory" :
					       "cannot be read";
	if ((bio = BIO_new_mem_buf(buf, (int)len)) == NULL)
		why = "out of memory";
	else if ((x = PEM_read_bio_X509(bio, NULL, no_passphrase, NULL)) ==
	    NULL)
		why = "holds no PEM certificate";
	else if (X509_check_ca(x) != 1 ||
	    (X509_get_extension_flags(x) & EXFLAG_CA) == 0 ||
	    ((X509_get_extension_flags(x) & EXFLAG_KUSAGE) &&
		!(X509_get_key_usage(x) & KU_KEY_CERT_SIGN)))
		why = "is not a CA certificate that may sign certificates "
		      "(basicConstraints CA:TRUE, keyUsage keyCertSign)";
	ERR_clear_error();
	BIO_free(bio);
	free(buf);
	if (why != NULL) {
		X509_free(x);
		return why;
	}
	*ret = x;
	return NULL;
}

static const char *
read_key(const char *path, X509 *cert, EVP_PKEY **ret)
{
	const char *why;

	if (conf_key_read(path, cert,
		"does not match the inspection CA certificate", ret, &why) ==
	    0)
		return NULL;
	if (why == NULL)
		why = errno == ENOENT ?
		    "does not exist; egressctl ca init writes it" :
		    "cannot be opened";
	return why;
}

int
conf_inspect_ca_read(const char *cert_path, const char *key_path,
    struct x509_st **ret_cert, struct evp_pkey_st **ret_key,
    const char **ret_file, const char **ret_why)
{
	X509 *x = NULL;
	EVP_PKEY *pk = NULL;
	const char *why;

	if ((why = read_cert(cert_path, &x)) != NULL) {
		*ret_file = cert_path;
		*ret_why = why;
		return EGRESS_ERR_INVALID;
	}
	if ((why = read_key(key_path, x, &pk)) != NULL) {
		X509_free(x);
		*ret_file = key_path;
		*ret_why = why;
		return EGRESS_ERR_INVALID;
	}
	*ret_cert = x;
	*ret_key = pk;
	return 0;
}

int
conf_has_inspect(const struct conf_snapshot *s)
{
	size_t i;

	for (i = 0; i < s->ninstances; i++)
		if (s->instances[i].tls_inspect)
			return 1;
	return 0;
}

void
conf_inspect_entry(const char *path, const char *sec, const struct conf_val *v,
    struct conf_instance *ci, struct conf_errors *errs)
{
	if (v == NULL || v->str == NULL)
		return;
	if (strcmp(v->str, "true") == 0) {
		ci->tls_inspect = v->line; /* its line stands for true */
		if (!(ci->granted_permissions & POLICY_PERM_HTTP_CLIENT))
			conf_errors_addf(errs,
			    "%s:%d: [%s] tls_inspect: true needs http_client "
			    "in permissions (every request inside an "
			    "inspected tunnel is an http request)",
			    path, v->line, sec);
	} else if (strcmp(v->str, "false") != 0)
		conf_errors_addf(errs,
		    "%s:%d: [%s] tls_inspect: '%s' is not a boolean; write "
		    "true or false (the default)",
		    path, v->line, sec, v->str);
}

int
conf_peek_inspect_ca(const char *path, char **ret_cert, char **ret_key,
    struct conf_errors *reterr)
{
	char *cert = NULL, *key = NULL;
	int found, r;

	if ((r = conf_peek_path(path, "tls", "inspect_ca_cert",
		 CONF_INSPECT_CA_CERT, &cert, &found, reterr)) != 0 ||
	    (r = conf_peek_path(path, "tls", "inspect_ca_key",
		 CONF_INSPECT_CA_KEY, &key, &found, reterr)) != 0) {
		free(cert);
		return r;
	}
	*ret_cert = cert;
	*ret_key = key;
	return 0;
}

/* value resolved against dir, or dir/def when value is NULL. */
static char *
ca_path(const char *dir, const struct conf_val *value, const char *def)
{
	const char *v = value != NULL && value->str != NULL ? value->str : def;
	char *p;

	if (v[0] == '/')
		return strdup(v);
	if (asprintf(&p, "%s/%s", dir, v) < 0)
		return NULL;
	return p;
}

/* The PEM text of x, in *ret (malloc'd). */
static int
ca_pem(X509 *x, char **ret)
{
	BIO *bio = BIO_new(BIO_s_mem());
	char *p = NULL, *q;
	long n;
	int rc = EGRESS_ERR_NOMEM;

	/* The BIO's bytes end with no NUL: copy exactly n of them. */
	if (bio != NULL && PEM_write_bio_X509(bio, x) == 1 &&
	    (n = BIO_get_mem_data(bio, &p)) > 0 &&
	    (q = malloc((size_t)n + 1)) != NULL) {
		memcpy(q, p, (size_t)n);
		q[n] = '\0';
		*ret = q;
		rc = 0;
	}
	ERR_clear_error();
	BIO_free(bio);
	return rc;
}

int
conf_inspect_build(const char *path, const char *dir,
    const struct conf_val *cert, const struct conf_val *key,
    struct conf_snapshot *s, struct conf_errors *errs)
{
	const struct conf_instance *first = NULL;
	const char *file = NULL, *why = NULL;
	X509 *x = NULL;
	EVP_PKEY *pk = NULL;
	int line;
	size_t i;

	if ((s->inspect_ca_cert = ca_path(dir, cert, CONF_INSPECT_CA_CERT)) ==
		NULL ||
	    (s->inspect_ca_key = ca_path(dir, key, CONF_INSPECT_CA_KEY)) ==
		NULL)
		return EGRESS_ERR_NOMEM;
	for (i = 0; i < s->ninstances && first == NULL; i++)
		if (s->instances[i].tls_inspect)
			first = &s->instances[i];
	if (first == NULL)
		return 0;
	if (strlen(s->inspect_ca_cert) >= PATH_MAX ||
	    strlen(s->inspect_ca_key) >= PATH_MAX) {
		conf_errors_addf(errs,
		    "%s:%d: [tls] inspect_ca_cert/inspect_ca_key: a path is "
		    "longer than %d bytes once resolved",
		    path, cert != NULL ? cert->line : first->line,
		    PATH_MAX - 1);
		return 0;
	}
	if (conf_track_file(s, s->inspect_ca_cert, CA_FILE_MAX) != 0 ||
	    conf_track_file(s, s->inspect_ca_key, CA_FILE_MAX) != 0)
		return EGRESS_ERR_NOMEM;
	if (conf_inspect_ca_read(s->inspect_ca_cert, s->inspect_ca_key, &x,
		&pk, &file, &why) == 0) {
		int rc = ca_pem(x, &s->inspect_ca_pem);

		X509_free(x);
		EVP_PKEY_free(pk);
		return rc;
	}
	if (file == s->inspect_ca_key)
		line = key != NULL ? key->line : first->tls_inspect;
	else
		line = cert != NULL ? cert->line : first->tls_inspect;
	conf_errors_addf(errs,
	    "%s:%d: [tls] %s: %s %s (the inspection CA that tls_inspect of "
	    "[plugins.entries.%s] needs)",
	    path, line,
	    file == s->inspect_ca_key ? "inspect_ca_key" : "inspect_ca_cert",
	    file, why, first->name);
	return 0;
}
