/* SPDX-License-Identifier: ISC */
/*
 * The snapshot once built: freeing it, finding an instance, the limits an
 * instance's entry overrides, and the default configuration path.
 */
#include <stdlib.h>
#include <string.h>

#include "conf/confint.h"

static void
instance_done(struct conf_instance *ci)
{
	size_t i;

	free(ci->name);
	free(ci->plugin);
	free(ci->manifest_path);
	policy_grant_free(ci->hosts);
	policy_grant_free(ci->allow_private);
	policy_grant_free(ci->allow_loopback);
	free(ci->socket_owner);
	free(ci->socket_group);
	free(ci->proxy_listen);
	if (ci->proxy_token != NULL)
		explicit_bzero(ci->proxy_token, strlen(ci->proxy_token));
	free(ci->proxy_token);
	for (i = 0; i < ci->ntls_profiles; i++)
		free(ci->tls_profiles[i]);
	free(ci->tls_profiles);
	conf_manifest_free(ci->manifest);
	free(ci->manifest_error);
}

void
conf_snapshot_free(struct conf_snapshot *s)
{
	size_t i;

	if (s == NULL)
		return;
	free(s->path);
	free(s->dir);
	for (i = 0; i < s->ntrusted_keys; i++)
		free(s->trusted_keys[i]);
	free(s->trusted_keys);
	conf_keyring_free(s->keyring);
	free(s->package_dir);
	free(s->instance_socket_dir);
	free(s->control_socket);
	free(s->log_path);
	free(s->control_uids);
	free(s->control_gids);
	for (i = 0; i < s->nresolver_servers; i++)
		free(s->resolver_servers[i]);
	free(s->resolver_servers);
	for (i = 0; i < s->nextra_methods; i++)
		free(s->extra_methods[i]);
	free(s->extra_methods);
	free(s->ca_file);
	free(s->inspect_ca_cert);
	free(s->inspect_ca_key);
	free(s->inspect_ca_pem);
	conf_tls_profiles_free(s);
	free(s->upstream_proxy_url);
	if (s->upstream_proxy_auth != NULL)
		explicit_bzero(s->upstream_proxy_auth,
		    strlen(s->upstream_proxy_auth));
	free(s->upstream_proxy_auth);
	free(s->metrics_listen);
	for (i = 0; i < s->ninstances; i++)
		instance_done(&s->instances[i]);
	free(s->instances);
	for (i = 0; i < s->nfiles; i++)
		free(s->files[i].path);
	free(s->files);
	free(s);
}

static int
instance_key_cmp(const void *key, const void *elem)
{
	const struct conf_instance *ci = elem;

	return strcmp(key, ci->name);
}

const struct conf_instance *
conf_instance_find(const struct conf_snapshot *s, const char *name)
{
	if (s == NULL || name == NULL || s->ninstances == 0)
		return NULL;
	return bsearch(name, s->instances, s->ninstances,
	    sizeof(*s->instances), instance_key_cmp);
}

void
conf_stream_limits(const struct conf_snapshot *s,
    const struct conf_instance *ci, unsigned *ret_idle, unsigned *ret_life)
{
	*ret_idle = ci != NULL && ci->stream_idle_timeout_ms != 0 ?
	    ci->stream_idle_timeout_ms :
	    s->stream_idle_timeout_ms;
	*ret_life = ci != NULL && ci->stream_max_lifetime_ms != 0 ?
	    ci->stream_max_lifetime_ms :
	    s->stream_max_lifetime_ms;
}

const char *
conf_default_path(const char *arg)
{
	const char *env;

	if (arg != NULL)
		return arg;
	if ((env = secure_getenv("EGRESSD_CONFIG")) != NULL && env[0] != '\0')
		return env;
	return CONF_DEFAULT_PATH;
}
