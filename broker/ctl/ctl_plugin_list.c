/* SPDX-License-Identifier: ISC */
/*
 * `egressctl plugin list`: every instance with its plugin, signature,
 * permissions, reach (the grant within the declaration), what is declared
 * and not granted or granted and not declared, its carve-outs and its
 * socket, as text or JSON. Every set is computed by pkg_reach_compute()
 * with policy/'s grant functions; nothing here decides reachability.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "broker/ctl/ctl.h"
#include "broker/ctl/ctl_edit.h"
#include "broker/ctl/pkg.h"
#include "conf/conf.h"
#include "policy/policy.h"

static json_t *
json_strv(const struct pkg_strv *sv)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; a != NULL && i < sv->n; i++)
		json_array_append_new(a, json_string(sv->v[i]));
	return a;
}

static json_t *
json_perms(unsigned mask)
{
	json_t *a = json_array();
	unsigned bit;

	for (bit = 1; a != NULL && bit <= POLICY_PERM_SOCKET_CLIENT; bit <<= 1)
		if ((mask & bit) && policy_permission_name(bit) != NULL)
			json_array_append_new(a,
			    json_string(policy_permission_name(bit)));
	return a;
}

static void
print_field(const char *label, const struct pkg_strv *sv)
{
	size_t i;

	printf("  %-24s", label);
	if (sv->n == 0)
		printf("(none)");
	for (i = 0; i < sv->n; i++)
		printf("%s%s", i ? ", " : "", sv->v[i]);
	printf("\n");
}

/* The TLS profiles the entry lets its requests select. */
static json_t *
json_profiles(const struct conf_instance *ci)
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; a != NULL && i < ci->ntls_profiles; i++)
		json_array_append_new(a, json_string(ci->tls_profiles[i]));
	return a;
}

static void
print_profiles(const struct conf_instance *ci)
{
	size_t i;

	if (ci->ntls_profiles == 0)
		return;
	printf("  %-24s", "tls profiles:");
	for (i = 0; i < ci->ntls_profiles; i++)
		printf("%s%s", i ? ", " : "", ci->tls_profiles[i]);
	printf("\n");
}

int
ctl_plugin_list(struct ctl_ctx *ctx, int json)
{
	struct conf_snapshot *s = NULL;
	json_t *arr = NULL;
	char pbuf[128];
	size_t i;
	int rc = CTL_EXIT_ERROR;

	if (ctl_conf_load(ctx->config_path, &s) != 0) {
		rc = CTL_EXIT_CONFIG;
		goto out;
	}
	if (json && (arr = json_array()) == NULL)
		goto out;
	if (!json && s->ninstances == 0)
		printf("no instances: nothing has network reach\n");
	for (i = 0; i < s->ninstances; i++) {
		const struct conf_instance *ci = &s->instances[i];
		const struct conf_manifest *m = ci->manifest;
		struct pkg_reach r;
		char *sock = NULL, *rel = NULL;

		if (pkg_reach_compute(ci, m, NULL, &r) != 0)
			goto out;
		if (r.effective == 0) /* no permission: no transport reaches */
			pkg_strv_done(&r.reach);
		if (asprintf(&sock, "%s/%s.sock",
			s->instance_socket_dir ? s->instance_socket_dir :
						 "/run/egressd/instances",
			ci->name) < 0)
			sock = NULL;
		rel = ctl_path_rel(s->dir, ci->manifest_path);
		if (json) {
			json_t *o = json_object();

			json_object_set_new(o, "instance",
			    json_string(ci->name));
			json_object_set_new(o, "plugin",
			    json_string(ci->plugin));
			json_object_set_new(o, "version",
			    m ? json_string(m->version) : json_null());
			json_object_set_new(o, "manifest",
			    json_string(rel ? rel : ci->manifest_path));
			json_object_set_new(o, "signature",
			    m ? json_string(conf_sig_status_str(m->sig)) :
				json_null());
			json_object_set_new(o, "manifest_error",
			    ci->manifest_error ?
				json_string(ci->manifest_error) :
				json_null());
			json_object_set_new(o, "permissions",
			    json_perms(r.effective));
			json_object_set_new(o, "permissions_requested",
			    json_perms(r.requested));
			json_object_set_new(o, "permissions_granted",
			    json_perms(r.granted_perms));
			json_object_set_new(o, "operator_defined",
			    json_boolean(r.operator_defined));
			json_object_set_new(o, "reach", json_strv(&r.reach));
			json_object_set_new(o, "declared_not_granted",
			    json_strv(&r.not_granted));
			json_object_set_new(o, "granted_not_declared",
			    json_strv(&r.ineffective));
			json_object_set_new(o, "egress_hosts",
			    json_strv(&r.granted));
			json_object_set_new(o, "egress_allow_private",
			    json_strv(&r.private_hosts));
			json_object_set_new(o, "egress_allow_loopback",
			    json_strv(&r.loopback_hosts));
			json_object_set_new(o, "tls_profiles",
			    json_profiles(ci));
			json_object_set_new(o, "socket",
			    sock ? json_string(sock) : json_null());
			json_array_append_new(arr, o);
		} else {
			printf("%s\n", ci->name);
			printf("  %-24s%s %s (%s)\n", "plugin:", ci->plugin,
			    m ? m->version : "?",
			    rel ? rel : ci->manifest_path);
			if (m != NULL)
				printf("  %-24s%s\n",
				    "signature:", conf_sig_status_str(m->sig));
			else
				printf("  %-24smanifest refused: %s\n",
				    "signature:",
				    ci->manifest_error ? ci->manifest_error :
							 "?");
			printf("  %-24s%s\n", "permissions:",
			    ctl_perm_list(r.effective, pbuf, sizeof(pbuf)));
			if (r.requested & ~r.granted_perms)
				printf("  %-24s%s\n",
				    "requested, not granted:",
				    ctl_perm_list(r.requested &
					    ~r.granted_perms,
					pbuf, sizeof(pbuf)));
			print_field(r.operator_defined ? "reach (operator):" :
							 "reach:",
			    &r.reach);
			if (!r.operator_defined)
				print_field("declared, not granted:",
				    &r.not_granted);
			print_field("granted, not declared:", &r.ineffective);
			print_field("private carve-outs:", &r.private_hosts);
			if (r.loopback_hosts.n > 0)
				print_field("loopback carve-outs:",
				    &r.loopback_hosts);
			print_profiles(ci);
			printf("  %-24s%s\n", "socket:", sock ? sock : "?");
		}
		pkg_reach_done(&r);
		free(sock);
		free(rel);
	}
	if (json && ctl_print_json(arr) != 0)
		goto out;
	rc = CTL_EXIT_OK;
out:
	json_decref(arr);
	conf_snapshot_free(s);
	return rc;
}
