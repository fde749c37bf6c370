/* SPDX-License-Identifier: ISC */
/*
 * [tls.profiles.NAME] sections and the tls_profiles key of an entry: the
 * trust material (CA file, client certificate and key, minimum version,
 * ALPN) a request may select by name. Every value and every file is
 * checked at load, with OpenSSL's PEM readers: a CA or certificate file
 * must hold PEM certificates, a key file must be a regular file only its
 * owner may read, hold one unencrypted PEM private key and match its
 * certificate. A key's bytes are wiped after the check and never appear
 * in a message.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "conf/confint.h"

#define PEM_FILE_MAX (4 * 1024 * 1024) /* bytes of a CA or cert file */
#define KEY_FILE_MAX (64 * 1024)       /* bytes of a key file */

const struct conf_keydef conf_tls_profile_keys[] = {
	{ "ca_file", 0 },
	{ "cert_file", 0 },
	{ "key_file", 0 },
	{ "min_version", 0 },
	{ "alpn", 1 },
	{ NULL, 0 },
};

struct tp_ctx {
	const char *path; /* the configuration, for messages */
	const char *dir;
	const struct conf_sec *sec;
	struct conf_snapshot *s;
	struct conf_errors *errs;
	int nomem;
};

static char *
tp_resolve(const char *dir, const char *value)
{
	char *p;

	if (value[0] == '/')
		return strdup(value);
	if (asprintf(&p, "%s/%s", dir, value) < 0)
		return NULL;
	return p;
}

/* A passphrase is never asked for: an encrypted key does not load. */
static int
tp_no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1;
}

/*
 * Read the PEM certificates of buf (len bytes); return how many, with the
 * first one in *ret_first when ret_first is not NULL (the caller frees
 * it).
 */
static int
tp_count_certs(const char *buf, size_t len, X509 **ret_first)
{
	BIO *bio;
	X509 *x;
	int n = 0;

	if (len > INT_MAX || (bio = BIO_new_mem_buf(buf, (int)len)) == NULL)
		return 0;
	while ((x = PEM_read_bio_X509(bio, NULL, tp_no_passphrase, NULL)) !=
	    NULL) {
		if (n == 0 && ret_first != NULL)
			*ret_first = x;
		else
			X509_free(x);
		n++;
	}
	ERR_clear_error();
	BIO_free(bio);
	return n;
}

/* The value of key, as a resolved path in *ret; NULL when unset (an
 * empty value is unset, as everywhere in the file). */
static const struct conf_val *
tp_path(struct tp_ctx *c, const char *key, char **ret)
{
	const struct conf_val *v = conf_sec_cval(c->sec, key);

	*ret = NULL;
	if (v == NULL || v->line == 0 || v->str == NULL)
		return NULL;
#ifndef __clang__ /* gcc 12 -fanalyzer loses the block stored in *ret,
		  * which the caller owns from here on */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wanalyzer-malloc-leak"
#endif
	if ((*ret = tp_resolve(c->dir, v->str)) == NULL) {
		c->nomem = 1;
		return NULL;
	}
	if (strlen(*ret) >= PATH_MAX) {
		conf_errors_addf(c->errs,
		    "%s:%d: [%s] %s: the path is longer than %d bytes once "
		    "resolved",
		    c->path, v->line, c->sec->name, key, PATH_MAX - 1);
		free(*ret);
		*ret = NULL;
		return NULL;
	}
	if (conf_track_file(c->s, *ret,
		strcmp(key, "key_file") == 0 ? KEY_FILE_MAX : PEM_FILE_MAX) !=
	    0)
		c->nomem = 1;
	return v;
}
#ifndef __clang__
#pragma GCC diagnostic pop
#endif

/* A CA or certificate file: PEM certificates. */
static void
tp_check_certs(struct tp_ctx *c, const struct conf_val *v, const char *key,
    const char *file, X509 **ret_first)
{
	struct conf_file_id id = { 0 };
	char *buf = NULL;
	size_t len = 0;
	int rc;

	rc = conf_read_file(file, PEM_FILE_MAX, &buf, &len, &id);
	if (rc != 0) {
		conf_errors_addf(c->errs, "%s:%d: [%s] %s: %s: %s", c->path,
		    v->line, c->sec->name, key, file,
		    rc == EGRESS_ERR_TOO_BIG   ? "larger than 4 MiB" :
			rc == EGRESS_ERR_NOMEM ? "out of memory" :
						 strerror(errno));
		return;
	}
	if (tp_count_certs(buf, len, ret_first) == 0)
		conf_errors_addf(c->errs,
		    "%s:%d: [%s] %s: %s holds no PEM certificate", c->path,
		    v->line, c->sec->name, key, file);
	free(buf);
}

/* The owner every key file must have, once the broker has said it. */
static int key_owner_set;
static uid_t key_owner;

void
conf_key_owner_require(uid_t uid)
{
	key_owner = uid;
	key_owner_set = 1;
}

int
conf_secret_owner_ok(uid_t uid)
{
	return !key_owner_set || uid == key_owner;
}

/*
 * A key file: a regular file only its owner may read (opened without
 * following a final symlink), owned by the broker's user when it has
 * said which, one unencrypted PEM private key, matching cert (when not
 * NULL). The bytes are wiped once parsed.
 */
int
conf_key_read(const char *path, X509 *cert, const char *mismatch,
    EVP_PKEY **ret, const char **ret_why)
{
	char buf[KEY_FILE_MAX];
	const char *why = NULL;
	EVP_PKEY *pk = NULL;
	struct stat sb;
	BIO *bio = NULL;
	ssize_t n = 0;
	int fd;

	*ret_why = NULL;
	fd = open(path,
	    O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -1; /* errno says why */
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
		why = "is not a regular file";
	else if ((sb.st_mode & 077) != 0)
		why = "is group- or world-accessible; chmod 600 it";
	else if (!conf_secret_owner_ok(sb.st_uid))
		why = CONF_OWNER_WHY;
	else if ((n = read(fd, buf, sizeof(buf))) < 0 ||
	    (size_t)n == sizeof(buf))
		why = "cannot be read, or is larger than 64 KiB";
	else if ((bio = BIO_new_mem_buf(buf, (int)n)) == NULL)
		why = "out of memory";
	else if ((pk = PEM_read_bio_PrivateKey(bio, NULL, tp_no_passphrase,
		      NULL)) == NULL)
		why = "holds no unencrypted PEM private key";
	else if (cert != NULL && X509_check_private_key(cert, pk) != 1)
		why = mismatch;
	ERR_clear_error();
	BIO_free(bio);
	explicit_bzero(buf, sizeof(buf));
	(void)close(fd);
	if (why != NULL || ret == NULL) {
		EVP_PKEY_free(pk);
		*ret_why = why;
		return why != NULL ? -1 : 0;
	}
	*ret = pk;
	return 0;
}

static void
tp_check_key(struct tp_ctx *c, const struct conf_val *v, const char *file,
    X509 *cert, EVP_PKEY **ret)
{
	const char *why;

	if (conf_key_read(file, cert,
		"does not match the certificate of "
		"cert_file",
		ret, &why) == 0)
		return;
	if (why == NULL)
		conf_errors_addf(c->errs, "%s:%d: [%s] key_file: %s: %s",
		    c->path, v->line, c->sec->name, file, strerror(errno));
	else
		conf_errors_addf(c->errs, "%s:%d: [%s] key_file: %s %s",
		    c->path, v->line, c->sec->name, file, why);
}

static void
tp_min_version(struct tp_ctx *c, struct conf_tls_profile *p)
{
	const struct conf_val *v = conf_sec_cval(c->sec, "min_version");

	p->min_version = 12;
	if (v == NULL || v->line == 0 || v->str == NULL)
		return;
	if (strcmp(v->str, "TLSv1.2") == 0)
		p->min_version = 12;
	else if (strcmp(v->str, "TLSv1.3") == 0)
		p->min_version = 13;
	else
		conf_errors_addf(c->errs,
		    "%s:%d: [%s] min_version: '%s' is not a version; write "
		    "TLSv1.2 (the default) or TLSv1.3",
		    c->path, v->line, c->sec->name, v->str);
}

static void
tp_alpn(struct tp_ctx *c, struct conf_tls_profile *p)
{
	const struct conf_val *v = conf_sec_cval(c->sec, "alpn");
	size_t i, j, len;

	if (v == NULL)
		return;
	if (v->list.n > CONF_ALPN_MAX) {
		conf_errors_addf(c->errs,
		    "%s:%d: [%s] alpn: %zu protocols; at most %d", c->path,
		    v->line, c->sec->name, v->list.n, CONF_ALPN_MAX);
		return;
	}
	for (i = 0; i < v->list.n; i++) {
		const char *s = v->list.v[i].s;
		int bad = 0;

		len = strlen(s);
		for (j = 0; j < len; j++)
			if (s[j] < 0x21 || s[j] > 0x7e)
				bad = 1;
		if (len == 0 || len > 64 || bad ||
		    p->alpn_len + 1 + len > sizeof(p->alpn)) {
			conf_errors_addf(c->errs,
			    "%s:%d: [%s] alpn: '%s' is not a protocol id; "
			    "write 1 to 64 visible ASCII characters per "
			    "protocol (such as h2 or http/1.1), %d bytes in "
			    "all",
			    c->path, v->list.v[i].line, c->sec->name, s,
			    CONF_ALPN_WIRE_MAX);
			return;
		}
		p->alpn[p->alpn_len++] = (unsigned char)len;
		memcpy(p->alpn + p->alpn_len, s, len);
		p->alpn_len += len;
	}
}

static void
tp_build_one(struct tp_ctx *c, struct conf_tls_profile *p)
{
	const struct conf_val *ca, *cert, *key;
	X509 *first = NULL;

	p->line = c->sec->line;
#ifndef __clang__ /* gcc 12 -fanalyzer loses the block stored in p->name */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wanalyzer-malloc-leak"
#endif
	if ((p->name = strdup(c->sec->name +
		 strlen(CONF_TLS_PROFILES_PREFIX))) == NULL) {
		c->nomem = 1;
		return;
	}
#ifndef __clang__
#pragma GCC diagnostic pop
#endif
	ca = tp_path(c, "ca_file", &p->ca_file);
	cert = tp_path(c, "cert_file", &p->cert_file);
	key = tp_path(c, "key_file", &p->key_file);
	if (c->nomem)
		return;
	if (ca != NULL)
		tp_check_certs(c, ca, "ca_file", p->ca_file, NULL);
	if (cert != NULL)
		tp_check_certs(c, cert, "cert_file", p->cert_file, &first);
	if (key != NULL)
		tp_check_key(c, key, p->key_file, first, &p->key);
	X509_free(first);
	if ((cert != NULL) != (key != NULL))
		conf_errors_addf(c->errs,
		    "%s:%d: [%s] %s: set without %s; a client certificate "
		    "needs both cert_file and key_file",
		    c->path, cert != NULL ? cert->line : key->line,
		    c->sec->name, cert != NULL ? "cert_file" : "key_file",
		    cert != NULL ? "key_file" : "cert_file");
	tp_min_version(c, p);
	tp_alpn(c, p);
}

static int
tp_cmp(const void *a, const void *b)
{
	const struct conf_tls_profile *x = a, *y = b;

	return strcmp(x->name, y->name);
}

int
conf_tls_profiles_build(const char *path, const char *dir,
    struct conf_sec *const *secs, size_t n, struct conf_snapshot *s,
    struct conf_errors *errs)
{
	struct tp_ctx c;
	size_t i;

	if (n == 0)
		return 0;
	if ((s->tls_profiles = calloc(n, sizeof(*s->tls_profiles))) == NULL)
		return EGRESS_ERR_NOMEM;
	memset(&c, 0, sizeof(c));
	c.path = path;
	c.dir = dir;
	c.s = s;
	c.errs = errs;
	for (i = 0; i < n; i++) {
		c.sec = secs[i];
		tp_build_one(&c, &s->tls_profiles[i]);
		s->ntls_profiles++;
		if (c.nomem)
			return EGRESS_ERR_NOMEM;
	}
	qsort(s->tls_profiles, s->ntls_profiles, sizeof(*s->tls_profiles),
	    tp_cmp);
	return 0;
}

int
conf_tls_profiles_entry(const char *path, const char *sec,
    const struct conf_list *l, const struct conf_snapshot *s,
    struct conf_instance *ci, struct conf_errors *errs)
{
	size_t i;

	if (l->n == 0)
		return 0;
	if (l->n > CONF_TLS_PROFILES_MAX) {
		conf_errors_addf(errs,
		    "%s:%d: [%s] tls_profiles: %zu profiles; at most %d", path,
		    l->v[0].line, sec, l->n, CONF_TLS_PROFILES_MAX);
		return 0;
	}
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): array of pointers */
	if ((ci->tls_profiles = calloc(l->n, sizeof(char *))) == NULL)
		return EGRESS_ERR_NOMEM;
	for (i = 0; i < l->n; i++) {
		const char *name = l->v[i].s;

		if (conf_tls_profile_find(s, name, strlen(name)) == NULL) {
			conf_errors_addf(errs,
			    "%s:%d: [%s] tls_profiles: '%s' is not a profile; "
			    "define [tls.profiles.%s] or remove it here",
			    path, l->v[i].line, sec, name, name);
			continue;
		}
#ifndef __clang__ /* gcc 12 -fanalyzer loses the block stored in ci->tls_profiles */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wanalyzer-malloc-leak"
#endif
		if ((ci->tls_profiles[ci->ntls_profiles] = strdup(name)) ==
		    NULL)
			return EGRESS_ERR_NOMEM;
#ifndef __clang__
#pragma GCC diagnostic pop
#endif
		ci->ntls_profiles++;
	}
	return 0;
}

void
conf_tls_profiles_free(struct conf_snapshot *s)
{
	size_t i;

	for (i = 0; i < s->ntls_profiles; i++) {
		free(s->tls_profiles[i].name);
		free(s->tls_profiles[i].ca_file);
		free(s->tls_profiles[i].cert_file);
		free(s->tls_profiles[i].key_file);
		EVP_PKEY_free(s->tls_profiles[i].key);
	}
	free(s->tls_profiles);
	s->tls_profiles = NULL;
	s->ntls_profiles = 0;
}

const struct conf_tls_profile *
conf_tls_profile_find(const struct conf_snapshot *s, const char *name,
    size_t len)
{
	size_t lo = 0, hi = s->ntls_profiles;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const char *m = s->tls_profiles[mid].name;
		size_t mlen = strlen(m);
		int c = memcmp(m, name, mlen < len ? mlen : len);

		if (c == 0)
			c = (mlen > len) - (mlen < len);
		if (c == 0)
			return &s->tls_profiles[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

int
conf_instance_has_tls_profile(const struct conf_instance *ci, const char *name,
    size_t len)
{
	size_t i;

	if (ci == NULL)
		return 0;
	for (i = 0; i < ci->ntls_profiles; i++)
		if (strlen(ci->tls_profiles[i]) == len &&
		    memcmp(ci->tls_profiles[i], name, len) == 0)
			return 1;
	return 0;
}
