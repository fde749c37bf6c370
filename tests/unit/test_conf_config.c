/* SPDX-License-Identifier: ISC */
/*
 * Unit tests for the configuration (conf/config.c): every default, every
 * key of the fixture tests/data/conf/good/ with its relative paths
 * resolved, every configuration error with its line (all of a file's
 * errors, and no snapshot), the carve-out rule, manifests that refuse only
 * their own instance (missing, broken, wrong plugin name, bad signature),
 * the policy view (effective permissions, declaration, operator_defined),
 * and staleness detection after rewrites.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include "conf/confint.h"
#include "conf_test.h"

#define GOOD SRCDIR "/tests/data/conf/good"

static int
load_text(const char *text, struct conf_snapshot **s, struct conf_errors *e)
{
	return conf_load_buffer("/nonexistent/c.ini", text, strlen(text), s,
	    e);
}

/* ---- Defaults ----------------------------------------------------------- */

Test(conf_config, empty_file_gives_every_default)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors e = { 0 };

	cr_assert_eq(load_text("", &s, &e), 0, "%s", ct_errors(&e));
	cr_expect_str_eq(s->path, "/nonexistent/c.ini");
	cr_expect_str_eq(s->dir, "/nonexistent");
	cr_expect_eq(s->nat64.n, 0);
	cr_expect_eq(s->sig_mode, CONF_SIG_PERMISSIVE);
	cr_expect_eq(s->ntrusted_keys, 0);
	cr_expect_eq(conf_keyring_count(s->keyring), 0);
	cr_expect_str_eq(s->package_dir, "/nonexistent/packages");
	cr_expect_eq(s->max_connections_per_instance, 16);
	cr_expect_str_eq(s->instance_socket_dir, "/run/egressd/instances");
	cr_expect_str_eq(s->control_socket, "/run/egressd/control.sock");
	cr_expect_null(s->log_path);
	cr_expect_eq(s->drain_timeout_ms, 5000);
	cr_expect_eq(s->busy_poll_us, 0);
	cr_expect_eq(s->adaptive_poll_us, 50);
	cr_assert_eq(s->ncontrol_uids, 1);
	cr_expect_eq(s->control_uids[0], 0);
	cr_expect_eq(s->ncontrol_gids, 0);
	cr_expect_eq(s->nresolver_servers, 0);
	cr_expect_eq(s->resolver_timeout_ms, 5000);
	cr_expect_eq(s->connect_timeout_ms, 10000);
	cr_expect_eq(s->first_byte_timeout_ms, 30000);
	cr_expect_eq(s->between_bytes_timeout_ms, 30000);
	cr_expect_eq(s->stream_idle_timeout_ms, 300000);
	cr_expect_eq(s->stream_max_lifetime_ms, 3600000);
	cr_expect_eq(s->websocket_max_message_bytes, 16 * 1024 * 1024);
	cr_expect_null(s->ca_file);
	cr_expect_eq(s->ninstances, 0);
	cr_expect_null(conf_instance_find(s, "weather"));
	/* From a buffer, the configuration itself is not recorded. */
	cr_expect_eq(s->nfiles, 0);
	conf_snapshot_free(s);
}

Test(conf_config, entry_defaults)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors e = { 0 };
	const struct conf_instance *ci;
	unsigned idle, life;

	cr_assert_eq(load_text("[plugins.entries.x]\nplugin = x\nmanifest = "
			       "m.ini\n",
			 &s, &e),
	    0, "%s", ct_errors(&e));
	cr_assert_not_null(ci = conf_instance_find(s, "x"));
	cr_expect_str_eq(ci->plugin, "x");
	cr_expect_str_eq(ci->manifest_path, "/nonexistent/m.ini");
	cr_expect_eq(ci->granted_permissions, 0);
	cr_expect_eq(policy_grant_count(ci->hosts), 0);
	cr_expect_eq(policy_grant_count(ci->allow_private), 0);
	cr_expect_eq(policy_grant_count(ci->allow_loopback), 0);
	cr_expect_eq(ci->policy.allow_loopback, ci->allow_loopback);
	cr_expect_null(ci->socket_owner);
	cr_expect_null(ci->socket_group);
	cr_expect_eq(ci->line, 1);
	/* Its manifest does not exist: refused, not a config error. */
	cr_expect_null(ci->manifest);
	cr_assert_not_null(ci->manifest_error);
	cr_expect_str_eq(ci->manifest_error,
	    "/nonexistent/m.ini: no such "
	    "manifest");
	cr_expect_eq(ci->policy.manifest_ok, 0);
	cr_expect_eq(ci->policy.permissions, 0);
	conf_stream_limits(s, ci, &idle, &life);
	cr_expect_eq(idle, 300000);
	cr_expect_eq(life, 3600000);
	conf_snapshot_free(s);
}

/* An entry's stream limits override [limits] for its instance only. */
Test(conf_config, entry_stream_limits_override)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors e = { 0 };
	const struct conf_instance *x, *y;
	unsigned idle, life;

	cr_assert_eq(load_text("[limits]\nstream_idle_timeout_ms = 1000\n"
			       "stream_max_lifetime_ms = 2000\n"
			       "[plugins.entries.x]\nplugin = x\n"
			       "manifest = m.ini\n"
			       "stream_idle_timeout_ms = 600000\n"
			       "stream_max_lifetime_ms = 50\n"
			       "[plugins.entries.y]\nplugin = y\n"
			       "manifest = m.ini\n",
			 &s, &e),
	    0, "%s", ct_errors(&e));
	cr_assert_not_null(x = conf_instance_find(s, "x"));
	cr_assert_not_null(y = conf_instance_find(s, "y"));
	conf_stream_limits(s, x, &idle, &life);
	cr_expect_eq(idle, 600000);
	cr_expect_eq(life, 50);
	conf_stream_limits(s, y, &idle, &life);
	cr_expect_eq(idle, 1000);
	cr_expect_eq(life, 2000);
	conf_stream_limits(s, NULL, &idle, &life);
	cr_expect_eq(idle, 1000);
	cr_expect_eq(life, 2000);
	conf_snapshot_free(s);
}

/* ---- The fixture: every key, relative paths ------------------------------ */

/* A checkout made under umask 002 leaves the fixture's key group-writable,
 * which the key loader refuses. */
static void
fixture_key_guard(void)
{
	cr_assert_eq(chmod(GOOD "/keys/release.pem", 0644), 0);
}

Test(conf_config, fixture_every_key_and_relative_paths)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors e = { 0 };
	const struct conf_instance *w, *g;

	fixture_key_guard();

	cr_assert_eq(conf_load(GOOD "/egressd.ini", &s, &e), 0, "%s",
	    ct_errors(&e));
	cr_expect_str_eq(s->dir, GOOD);
	cr_expect_eq(s->nat64.n, 1);
	cr_expect_eq(s->nat64.v[0].len, 96);
	cr_expect_eq(s->sig_mode, CONF_SIG_STRICT);
	cr_assert_eq(s->ntrusted_keys, 1);
	cr_expect_str_eq(s->trusted_keys[0], GOOD "/keys/release.pem");
	cr_expect_eq(conf_keyring_count(s->keyring), 1);
	cr_expect_str_eq(s->package_dir, GOOD "/packages");
	cr_expect_eq(s->max_connections_per_instance, 4);
	cr_expect_str_eq(s->instance_socket_dir, GOOD "/run/instances");
	cr_expect_str_eq(s->control_socket, "/run/egressd-test/control.sock");
	cr_expect_str_eq(s->log_path, GOOD "/egressd.log");
	cr_expect_eq(s->drain_timeout_ms, 1500);
	cr_expect_eq(s->busy_poll_us, 50);
	cr_expect_eq(s->adaptive_poll_us, 0);
	cr_assert_eq(s->ncontrol_uids, 2);
	cr_expect_eq(s->control_uids[0], 0);
	cr_expect_eq(s->control_uids[1], 1000);
	cr_assert_eq(s->ncontrol_gids, 1);
	cr_expect_eq(s->control_gids[0], 27);
	cr_assert_eq(s->nresolver_servers, 3);
	cr_expect_str_eq(s->resolver_servers[0], "127.0.0.1:5353");
	cr_expect_str_eq(s->resolver_servers[1], "[::1]:53");
	cr_expect_str_eq(s->resolver_servers[2], "192.0.2.1");
	cr_expect_eq(s->resolver_timeout_ms, 2500);
	cr_expect_eq(s->connect_timeout_ms, 3000);
	cr_expect_eq(s->first_byte_timeout_ms, 4000);
	cr_expect_eq(s->between_bytes_timeout_ms, 6000);
	cr_expect_str_eq(s->ca_file, GOOD "/ca.pem");

	/* Sorted by name. */
	cr_assert_eq(s->ninstances, 2);
	cr_expect_str_eq(s->instances[0].name, "gitea");
	cr_expect_str_eq(s->instances[1].name, "weather");

	cr_assert_not_null(w = conf_instance_find(s, "weather"));
	cr_expect_str_eq(w->manifest_path,
	    GOOD "/packages/weather/manifest.ini");
	cr_assert_not_null(w->manifest, "%s", w->manifest_error);
	cr_expect_null(w->manifest_error);
	cr_expect_eq(w->manifest->sig, CONF_SIG_VALID);
	cr_expect_eq(policy_grant_count(w->hosts), 2);
	cr_expect_eq(w->policy.manifest_ok, 1);
	cr_expect_eq(w->policy.permissions, POLICY_PERM_HTTP_CLIENT);
	cr_expect_eq(w->policy.hosts, w->hosts);
	cr_expect_eq(w->policy.allow_private, w->allow_private);
	cr_expect_eq(w->policy.declared, w->manifest->hosts);
	cr_expect_eq(w->policy.operator_defined, 0);
	cr_expect_str_eq(w->policy.name, "weather");

	cr_assert_not_null(g = conf_instance_find(s, "gitea"));
	cr_assert_not_null(g->manifest, "%s", g->manifest_error);
	/* Entry grants http and websocket, manifest asks for http only. */
	cr_expect_eq(g->granted_permissions,
	    POLICY_PERM_HTTP_CLIENT | POLICY_PERM_WEBSOCKET_CLIENT);
	cr_expect_eq(g->policy.permissions, POLICY_PERM_HTTP_CLIENT);
	cr_expect_eq(g->policy.operator_defined, 1);
	cr_expect_eq(policy_grant_count(g->allow_private), 1);
	cr_expect_eq(policy_grant_count(g->allow_loopback), 1);
	cr_expect_eq(g->policy.allow_loopback, g->allow_loopback);
	cr_expect_eq(policy_grant_count(w->allow_loopback), 0);
	cr_expect_str_eq(g->socket_owner, "gitea");
	cr_expect_str_eq(g->socket_group, "1001");

	/* Files: the config, each manifest and .sig, the key. */
	cr_expect_eq(s->nfiles, 6);
	cr_expect_str_eq(s->files[0].path, GOOD "/egressd.ini");
	cr_expect_eq(s->files[0].exists, 1);
	conf_snapshot_free(s);
}

/* ---- Errors ------------------------------------------------------------ */

struct err_case {
	char in[400];
	char msg[400]; /* one message, exactly (prefix if it ends
				 * in ": ") */
};

ParameterizedTestParameters(conf_config, errors)
{
	static struct err_case cases[] = {
		{ "[plugins.entries.x]\nmanifest = m.ini\n",
		    "/nonexistent/c.ini:1: [plugins.entries.x] plugin: missing; "
		    "add 'plugin = NAME' (the [plugin] name of its manifest)" },
		{ "[plugins.entries.x]\nplugin = x\n",
		    "/nonexistent/c.ini:1: [plugins.entries.x] manifest: "
		    "missing; add 'manifest = packages/NAME/manifest.ini' "
		    "(relative to this file's folder)" },
		{ "[plugins.entries]\n",
		    "/nonexistent/c.ini:1: [plugins.entries]: an entry needs the "
		    "instance's name: write [plugins.entries.NAME]" },
		{ "[plugins.entries.Bad]\n",
		    "/nonexistent/c.ini:1: [plugins.entries.Bad]: 'Bad' is not "
		    "an instance name: 1 to 64 bytes of a-z, 0-9, '.', '_', "
		    "'-', starting with a letter or digit, without '..' (it "
		    "names the instance's socket file)" },
		{ "[plugins.entries.a..b]\n",
		    "/nonexistent/c.ini:1: [plugins.entries.a..b]: 'a..b' is not "
		    "an instance name: " },
		{ "[plugins.entries.a/b]\n",
		    "/nonexistent/c.ini:1: [plugins.entries.a/b]: 'a/b' is not "
		    "an instance name: " },
		{ "[plugins.entries.-a]\n",
		    "/nonexistent/c.ini:1: [plugins.entries.-a]: '-a' is not "
		    "an instance name: " },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\nplugin = y\n",
		    "/nonexistent/c.ini:4: [plugins.entries.x] plugin: given "
		    "twice (first at line 2); keep one" },
		{ "[plugins.entries.x]\nplugin = X\nmanifest = m\n",
		    "/nonexistent/c.ini:2: [plugins.entries.x] plugin: 'X' is "
		    "not a plugin name: " },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "permissions = http_client, ftp\n",
		    "/nonexistent/c.ini:4: [plugins.entries.x] permissions: "
		    "unknown permission 'ftp'; write http_client, "
		    "websocket_client or socket_client" },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "egress_hosts = ok.example\n  *\n",
		    "/nonexistent/c.ini:5: [plugins.entries.x] egress_hosts: "
		    "'*': " },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "egress_hosts = *.com\n",
		    "/nonexistent/c.ini:4: [plugins.entries.x] egress_hosts: "
		    "'*.com': " },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "egress_hosts = a.example\negress_allow_private = b.example\n",
		    "/nonexistent/c.ini:5: [plugins.entries.x] "
		    "egress_allow_private: 'b.example' is not covered by "
		    "egress_hosts; a carve-out only relaxes the address class "
		    "of a granted host, so add 'b.example' to egress_hosts or "
		    "remove it here" },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "egress_hosts = *.lan.example\n"
		  "egress_allow_private = *.other.example\n",
		    "/nonexistent/c.ini:5: [plugins.entries.x] "
		    "egress_allow_private: '*.other.example' is not covered by "
		    "egress_hosts; " },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "egress_hosts = lan.example\n"
		  "egress_allow_private = *.lan.example\n",
		    "/nonexistent/c.ini:5: [plugins.entries.x] "
		    "egress_allow_private: '*.lan.example' is not covered by "
		    "egress_hosts; " },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "egress_hosts = a.example\negress_allow_loopback = b.example\n",
		    "/nonexistent/c.ini:5: [plugins.entries.x] "
		    "egress_allow_loopback: 'b.example' is not covered by "
		    "egress_hosts; a carve-out only relaxes the address class "
		    "of a granted host, so add 'b.example' to egress_hosts or "
		    "remove it here" },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "egress_hosts = a.example\negress_allow_loopback = a.example\n"
		  "  *\n",
		    "/nonexistent/c.ini:6: [plugins.entries.x] "
		    "egress_allow_loopback: '*': " },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "egress_hosts = *.lan.example\n"
		  "egress_allow_loopback = *.example\n",
		    "/nonexistent/c.ini:5: [plugins.entries.x] "
		    "egress_allow_loopback: '*.example': " },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "socket_owner = bad user\n",
		    "/nonexistent/c.ini:4: [plugins.entries.x] socket_owner: "
		    "'bad user' is not a user name or numeric uid" },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "socket_group = 4294967295\n",
		    "/nonexistent/c.ini:4: [plugins.entries.x] socket_group: "
		    "'4294967295' is not a group name or numeric gid" },
		{ "[broker]\ninstance_socket_dir = /run/aaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "\n[plugins.entries.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx]\n"
		  "plugin = x\nmanifest = m\n",
		    "/nonexistent/c.ini:3: [plugins.entries.xxxxxxxxxxxxxxxxxxxx"
		    "xxxxxxxxxxxxxxxxxx]: the socket path " },
		{ "[plugins.limits]\nmax_connections_per_instance = 0\n",
		    "/nonexistent/c.ini:2: [plugins.limits] "
		    "max_connections_per_instance: 0 would refuse every "
		    "connection; write a number from 1 to 65535 (default 16)" },
		{ "[plugins.limits]\nmax_connections_per_instance = 1k\n",
		    "/nonexistent/c.ini:2: [plugins.limits] "
		    "max_connections_per_instance: '1k' is not a count; write a "
		    "decimal number from 1 to 65535 (default 16)" },
		{ "[plugins.limits]\nmax_connections_per_instance = 65536\n",
		    "/nonexistent/c.ini:2: [plugins.limits] "
		    "max_connections_per_instance: '65536' is not a count; " },
		{ "[plugins.security]\nsignature_mode = lax\n",
		    "/nonexistent/c.ini:2: [plugins.security] signature_mode: "
		    "unknown mode 'lax'; write disabled, permissive or strict" },
		{ "[plugins.security]\nsignature_mode = Strict\n",
		    "/nonexistent/c.ini:2: [plugins.security] signature_mode: "
		    "unknown mode 'Strict'; " },
		{ "[plugins.security]\ntrusted_keys = k.pem\n",
		    "/nonexistent/c.ini:2: [plugins.security] trusted_keys: "
		    "/nonexistent/k.pem: no such key file" },
		{ "[plugins]\npackages = p\n",
		    "/nonexistent/c.ini:2: [plugins] packages: unknown key; "
		    "[plugins] takes: package_dir" },
		{ "[security]\nnat64_prefixes = 64:ff9b:1::/48, 2001:db8::/33\n",
		    "/nonexistent/c.ini:2: [security] nat64_prefixes: "
		    "'2001:db8::/33': " },
		{ "[security]\nnat64_prefixes = 2001:db8:64::/96\n  junk\n",
		    "/nonexistent/c.ini:3: [security] nat64_prefixes: 'junk': " },
		{ "[broker]\ndrain_timeout_ms = 0\n",
		    "/nonexistent/c.ini:2: [broker] drain_timeout_ms: '0' is not "
		    "a duration; write a whole number of milliseconds from 1 to "
		    "3600000, in decimal digits (default 5000)" },
		{ "[broker]\ndrain_timeout_ms = 3600001\n",
		    "/nonexistent/c.ini:2: [broker] drain_timeout_ms: '3600001' "
		    "is not a duration; " },
		{ "[broker]\nbusy_poll_us = 1001\n",
		    "/nonexistent/c.ini:2: [broker] busy_poll_us: '1001' is not "
		    "a spin time; write a whole number of microseconds from 0 "
		    "(off) to 1000, in decimal digits (default 0)" },
		{ "[broker]\nbusy_poll_us = -5\n",
		    "/nonexistent/c.ini:2: [broker] busy_poll_us: '-5' is not "
		    "a spin time; " },
		{ "[broker]\nadaptive_poll_us = 1001\n",
		    "/nonexistent/c.ini:2: [broker] adaptive_poll_us: '1001' is "
		    "not a spin time; write a whole number of microseconds from "
		    "0 (off) to 1000, in decimal digits (default 50)" },
		{ "[broker]\nadaptive_poll_us = 5us\n",
		    "/nonexistent/c.ini:2: [broker] adaptive_poll_us: '5us' is "
		    "not a spin time; " },
		{ "[broker]\ncontrol_uids = 0, root\n",
		    "/nonexistent/c.ini:2: [broker] control_uids: 'root' is not "
		    "a numeric id; write decimal ids from 0 to 4294967294 (names "
		    "are not looked up here)" },
		{ "[broker]\ncontrol_gids = -1\n",
		    "/nonexistent/c.ini:2: [broker] control_gids: '-1' is not a "
		    "numeric id; " },
		{ "[broker]\ncontrol_socket = /run/aaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.sock\n",
		    "/nonexistent/c.ini:2: [broker] control_socket: " },
		{ "[broker]\nlog =\n",
		    "/nonexistent/c.ini:2: [broker] log: empty value; write a "
		    "value or remove the line to use the default" },
		{ "[resolver]\nservers = 2001:db8::1\n",
		    "/nonexistent/c.ini:2: [resolver] servers: '2001:db8::1': an "
		    "IPv6 address goes in brackets: write [ADDR] or [ADDR]:PORT; "
		    "write ADDR, ADDR:PORT, [ADDR] or [ADDR]:PORT" },
		{ "[resolver]\nservers = 127.0.0.1:0\n",
		    "/nonexistent/c.ini:2: [resolver] servers: '127.0.0.1:0': "
		    "the port must be a decimal number from 1 to 65535; " },
		{ "[resolver]\nservers = 127.0.0.1:053\n",
		    "/nonexistent/c.ini:2: [resolver] servers: '127.0.0.1:053': "
		    "the port must be " },
		{ "[resolver]\nservers = 127.1\n",
		    "/nonexistent/c.ini:2: [resolver] servers: '127.1': not a "
		    "dotted-quad IPv4 address; " },
		{ "[resolver]\nservers = dns.example\n",
		    "/nonexistent/c.ini:2: [resolver] servers: 'dns.example': "
		    "not a dotted-quad IPv4 address; " },
		{ "[resolver]\nservers = [fe80::1%eth0]:53\n",
		    "/nonexistent/c.ini:2: [resolver] servers: "
		    "'[fe80::1%eth0]:53': zone ids are not allowed; " },
		{ "[resolver]\nservers = [::1]53\n",
		    "/nonexistent/c.ini:2: [resolver] servers: '[::1]53': write "
		    "[ADDR]:PORT; " },
		{ "[resolver]\nservers = [127.0.0.1]\n",
		    "/nonexistent/c.ini:2: [resolver] servers: '[127.0.0.1]': "
		    "not an IPv6 address; write ADDR, ADDR:PORT, [ADDR] or "
		    "[ADDR]:PORT" },
		{ "[resolver]\nservers = 127.0.0.1:\n",
		    "/nonexistent/c.ini:2: [resolver] servers: '127.0.0.1:': the "
		    "port must be " },
		{ "[limits]\nconnect_timeout_ms = 10s\n",
		    "/nonexistent/c.ini:2: [limits] connect_timeout_ms: '10s' is "
		    "not a duration; write a whole number of milliseconds from 1 "
		    "to 3600000, in decimal digits (default 10000)" },
		{ "[limits]\nfirst_byte_timeout_ms = +5\n",
		    "/nonexistent/c.ini:2: [limits] first_byte_timeout_ms: '+5' "
		    "is not a duration; " },
		{ "[limits]\nstream_idle_timeout_ms = 0\n",
		    "/nonexistent/c.ini:2: [limits] stream_idle_timeout_ms: "
		    "'0' is not a duration; " },
		{ "[limits]\nwebsocket_max_message_bytes = 1023\n",
		    "/nonexistent/c.ini:2: [limits] websocket_max_message_bytes: "
		    "'1023' is not a size; write a whole number of bytes from "
		    "1024 to 268435456, in decimal digits (default 16777216)" },
		{ "[limits]\nwebsocket_max_message_bytes = 16M\n",
		    "/nonexistent/c.ini:2: [limits] websocket_max_message_bytes: "
		    "'16M' is not a size; " },
		{ "[limits]\nbetween_bytes_timeout_ms = 0x10\n",
		    "/nonexistent/c.ini:2: [limits] between_bytes_timeout_ms: "
		    "'0x10' is not a duration; " },
		{ "[tls]\nca_file = a\nca_file = b\n",
		    "/nonexistent/c.ini:3: [tls] ca_file: given twice (first at "
		    "line 2); keep one" },
		{ "[tls]\ncafile = a\n",
		    "/nonexistent/c.ini:2: [tls] cafile: unknown key; [tls] "
		    "takes: ca_file, inspect_ca_cert, inspect_ca_key" },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "tls_inspect = yes\n",
		    "/nonexistent/c.ini:4: [plugins.entries.x] tls_inspect: "
		    "'yes' is not a boolean; write true or false (the "
		    "default)" },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "permissions = http_client\ntls_inspect = true\n",
		    "/nonexistent/c.ini:5: [tls] inspect_ca_cert: "
		    "/nonexistent/inspect-ca.pem does not exist; egressctl ca "
		    "init writes it (the inspection CA that tls_inspect of "
		    "[plugins.entries.x] needs)" },
		{ "[tls]\ninspect_ca_cert = /nonexistent/ca.pem\n"
		  "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "permissions = http_client\ntls_inspect = true\n",
		    "/nonexistent/c.ini:2: [tls] inspect_ca_cert: "
		    "/nonexistent/ca.pem does not exist; " },
		{ "[resolvers]\n",
		    "/nonexistent/c.ini:1: [resolvers]: unknown section; the "
		    "sections are [security], [plugins], [plugins.security], "
		    "[plugins.limits], [plugins.entries.NAME], [broker], "
		    "[resolver], [limits], [tls], [tls.profiles.NAME], "
		    "[metrics] and [upstream_proxy]" },
		{ "[upstream_proxy]\nurl = http://proxy.corp:3128\n",
		    "/nonexistent/c.ini:2: [upstream_proxy] url: "
		    "'http://proxy.corp:3128': write http://ADDRESS:PORT with the "
		    "parent proxy's IP address (a name would be a resolution "
		    "outside the broker's checks)" },
		{ "[upstream_proxy]\nurl = https://10.0.0.1:3128\n",
		    "/nonexistent/c.ini:2: [upstream_proxy] url: "
		    "'https://10.0.0.1:3128': write " },
		{ "[upstream_proxy]\nurl = http://10.0.0.1:3128/x\n",
		    "/nonexistent/c.ini:2: [upstream_proxy] url: "
		    "'http://10.0.0.1:3128/x': write " },
		{ "[upstream_proxy]\nurl = http://u:p@10.0.0.1:3128\n",
		    "/nonexistent/c.ini:2: [upstream_proxy] url: '(not shown: "
		    "it has userinfo)': write http://ADDRESS:PORT with the parent "
		    "proxy's IP address (a name would be a resolution outside "
		    "the broker's checks; credentials go in credentials_file)" },
		{ "[upstream_proxy]\ncredentials_file = c\n",
		    "/nonexistent/c.ini:2: [upstream_proxy] credentials_file: "
		    "set without url" },
		{ "[upstream_proxy]\nurl = http://10.0.0.1:3128\nport = 1\n",
		    "/nonexistent/c.ini:3: [upstream_proxy] port: unknown key; "
		    "[upstream_proxy] takes: url, credentials_file" },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "egress = a.example\n",
		    "/nonexistent/c.ini:4: [plugins.entries.x] egress: unknown "
		    "key; [plugins.entries.x] takes: plugin, manifest, "
		    "permissions, egress_hosts, egress_allow_private, "
		    "egress_allow_loopback, socket_owner, socket_group, proxy_listen, "
		    "proxy_token_file, stream_idle_timeout_ms, "
		    "stream_max_lifetime_ms, tls_profiles, tls_inspect" },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "stream_idle_timeout_ms = 0\n",
		    "/nonexistent/c.ini:4: [plugins.entries.x] "
		    "stream_idle_timeout_ms: '0' is not a duration; write a whole "
		    "number of milliseconds from 1 to 3600000, in decimal digits "
		    "(unset: [limits] stream_idle_timeout_ms)" },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "stream_max_lifetime_ms = 3600001\n",
		    "/nonexistent/c.ini:4: [plugins.entries.x] "
		    "stream_max_lifetime_ms: '3600001' is not a duration; " },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "proxy_listen = 0.0.0.0:3128\nproxy_token_file = t\n",
		    "/nonexistent/c.ini:4: [plugins.entries.x] proxy_listen: "
		    "'0.0.0.0:3128': not a loopback address; " },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "proxy_listen = 10.0.0.1:3128\nproxy_token_file = t\n",
		    "/nonexistent/c.ini:4: [plugins.entries.x] proxy_listen: "
		    "'10.0.0.1:3128': not a loopback address; " },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "proxy_listen = /run/p.sock\nproxy_token_file = t\n",
		    "/nonexistent/c.ini:4: [plugins.entries.x] proxy_listen: "
		    "'/run/p.sock': write 127.0.0.1:PORT or [::1]:PORT; only "
		    "loopback is served" },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "proxy_listen = localhost:3128\nproxy_token_file = t\n",
		    "/nonexistent/c.ini:4: [plugins.entries.x] proxy_listen: "
		    "'localhost:3128': " },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "proxy_listen = 127.0.0.1:3128\n",
		    "/nonexistent/c.ini:4: [plugins.entries.x] proxy_token_file: "
		    "missing; proxy_listen needs a token file (mode 0600)" },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "proxy_token_file = t\n",
		    "/nonexistent/c.ini:4: [plugins.entries.x] proxy_token_file: "
		    "set without proxy_listen" },
		{ "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
		  "proxy_listen = 127.0.0.1:3128\nproxy_token_file = t\n",
		    "/nonexistent/c.ini:5: [plugins.entries.x] proxy_token_file: "
		    "/nonexistent/t cannot be opened" },
	};

	return cr_make_param_array(struct err_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

ParameterizedTest(struct err_case *c, conf_config, errors)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors e = { 0 };
	size_t i, n = strlen(c->msg);
	int found = 0;

	cr_assert_eq(load_text(c->in, &s, &e), EGRESS_ERR_INVALID, "%s",
	    c->in);
	cr_expect_null(s);
	for (i = 0; i < e.n; i++)
		if (c->msg[n - 1] == ' ' ? strncmp(e.msgs[i], c->msg, n) == 0 :
					   strcmp(e.msgs[i], c->msg) == 0)
			found = 1;
	cr_expect(found, "want: %s\ngot:\n%s", c->msg, ct_errors(&e));
	conf_errors_done(&e);
}

Test(conf_config, every_error_of_the_file_is_reported)
{
	static const char in[] =
	    "[security]\n"
	    "nat64_prefixes = bad1, 2001:db8:64::/96, bad2\n" /* 2 */
	    "[plugins.limits]\n"
	    "max_connections_per_instance = 0\n" /* 4 */
	    "[plugins.entries.a]\n"		 /* 5 */
	    "manifest = m\n"
	    "egress_hosts = *\n" /* 7 */
	    "[limits]\n"
	    "connect_timeout_ms = 0\n" /* 9 */
	    "bogus = 1\n";	       /* 10 */
	struct conf_snapshot *s = NULL;
	struct conf_errors e = { 0 };

	cr_assert_eq(load_text(in, &s, &e), EGRESS_ERR_INVALID);
	cr_expect_null(s);
	cr_expect_eq(e.n, 7, "%s", ct_errors(&e));
	cr_expect(ct_has_error(&e,
	    "c.ini:2: [security] nat64_prefixes: "
	    "'bad1'"));
	cr_expect(ct_has_error(&e,
	    "c.ini:2: [security] nat64_prefixes: "
	    "'bad2'"));
	cr_expect(ct_has_error(&e, "c.ini:4: [plugins.limits]"));
	cr_expect(ct_has_error(&e,
	    "c.ini:5: [plugins.entries.a] plugin: "
	    "missing"));
	cr_expect(ct_has_error(&e,
	    "c.ini:7: [plugins.entries.a] "
	    "egress_hosts: '*'"));
	cr_expect(ct_has_error(&e, "c.ini:9: [limits] connect_timeout_ms"));
	cr_expect(ct_has_error(&e, "c.ini:10: [limits] bogus: unknown key"));
	conf_errors_done(&e);
}

Test(conf_config, missing_file_is_an_io_error)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors e = { 0 };

	cr_assert_eq(conf_load("/nonexistent/egressd.ini", &s, &e),
	    EGRESS_ERR_IO);
	cr_expect_null(s);
	cr_assert_eq(e.n, 1);
	cr_expect_str_eq(e.msgs[0],
	    "/nonexistent/egressd.ini: no such "
	    "configuration file (give one with -c FILE or $EGRESSD_CONFIG)");
	conf_errors_done(&e);
}

/* ---- The carve-out rule --------------------------------------------------- */

struct carve_case {
	char hosts[128];
	char private[128];
	int ok;
};

ParameterizedTestParameters(conf_config, carve_out)
{
	static struct carve_case cases[] = {
		{ "git.lan.example", "git.lan.example", 1 },
		{ "*.lan.example", "git.lan.example", 1 },
		{ "*.lan.example", "*.lan.example", 1 },
		{ "*.lan.example", "*.x.lan.example", 1 },
		{ "a.example b.example", "b.example", 1 },
		{ "10.0.0.7", "10.0.0.7", 1 },
		{ "", "", 1 },
		{ "git.lan.example", "", 1 },
		{ "", "git.lan.example", 0 },
		{ "git.lan.example", "other.lan.example", 0 },
		{ "*.lan.example", "lan.example", 0 },
		{ "lan.example", "git.lan.example", 0 },
		{ "*.x.lan.example", "*.lan.example", 0 },
		{ "10.0.0.7", "10.0.0.8", 0 },
	};

	return cr_make_param_array(struct carve_case, cases,
	    sizeof(cases) / sizeof(cases[0]));
}

/* The same rule for both carve-outs, each on its own. */
ParameterizedTest(struct carve_case *c, conf_config, carve_out)
{
	static const char *const keys[] = { "egress_allow_private",
		"egress_allow_loopback" };
	struct conf_snapshot *s = NULL;
	struct conf_errors e = { 0 };
	char in[512], want[128];
	size_t k;
	int r;

	for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		(void)snprintf(in, sizeof(in),
		    "[plugins.entries.x]\nplugin = x\n"
		    "manifest = m\negress_hosts = %s\n%s = %s\n",
		    c->hosts, keys[k], c->private);
		(void)snprintf(want, sizeof(want),
		    "c.ini:5: [plugins.entries.x] %s: ", keys[k]);
		r = load_text(in, &s, &e);
		if (c->ok) {
			cr_expect_eq(r, 0, "%s", ct_errors(&e));
		} else {
			cr_expect_eq(r, EGRESS_ERR_INVALID);
			cr_expect(ct_has_error(&e, want), "%s", ct_errors(&e));
			cr_expect(ct_has_error(&e,
			    "is not covered by egress_hosts"));
		}
		conf_snapshot_free(s);
		s = NULL;
		conf_errors_done(&e);
	}
}

/* ---- Manifests refuse only their own instance ----------------------------- */

static const char two_entries[] =
    "[plugins.security]\n"
    "signature_mode = %s\n"
    "%s"
    "[plugins.entries.good]\n"
    "plugin = good\n"
    "manifest = pkg/good/manifest.ini\n"
    "permissions = http_client socket_client\n"
    "egress_hosts = api.good.example\n"
    "[plugins.entries.bad]\n" /* line 9 or 10 */
    "plugin = %s\n"
    "manifest = pkg/bad/manifest.ini\n"
    "permissions = http_client\n"
    "egress_hosts = api.bad.example\n";

static const char good_manifest[] =
    "[plugin]\nname = good\nversion = 1\npermissions = http_client "
    "websocket_client\n[egress]\nhosts = api.good.example\n";

static void
write_config(const char *mode, const char *keys, const char *plugin)
{
	char text[2048];

	(void)snprintf(text, sizeof(text), two_entries, mode, keys, plugin);
	ct_write_str("egressd.ini", text);
}

static struct conf_snapshot *
load_dir(void)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors e = { 0 };

	cr_assert_eq(conf_load(ct_path("egressd.ini"), &s, &e), 0, "%s",
	    ct_errors(&e));
	conf_errors_done(&e);
	return s;
}

static void
expect_good_instance(const struct conf_snapshot *s)
{
	const struct conf_instance *g = conf_instance_find(s, "good");

	cr_assert_not_null(g);
	cr_assert_not_null(g->manifest, "%s", g->manifest_error);
	cr_expect_eq(g->policy.manifest_ok, 1);
	/* Manifest asks http + websocket, entry grants http + socket. */
	cr_expect_eq(g->policy.permissions, POLICY_PERM_HTTP_CLIENT);
	cr_expect_eq(g->policy.declared, g->manifest->hosts);
}

static void
expect_refused(const struct conf_snapshot *s, const char *needle)
{
	const struct conf_instance *b = conf_instance_find(s, "bad");

	cr_assert_not_null(b);
	cr_expect_null(b->manifest);
	cr_assert_not_null(b->manifest_error);
	cr_expect(strstr(b->manifest_error, needle) != NULL, "want %s in %s",
	    needle, b->manifest_error);
	cr_expect_eq(b->policy.manifest_ok, 0);
	cr_expect_eq(b->policy.permissions, 0);
	cr_expect_null(b->policy.declared);
	cr_expect_eq(b->policy.operator_defined, 0);
	/* The grant stays visible for listing. */
	cr_expect_eq(policy_grant_count(b->hosts), 1);
	expect_good_instance(s);
}

static void
refuse_setup(void)
{
	ct_mkdir();
	ct_write_str("pkg/good/manifest.ini", good_manifest);
}

TestSuite(conf_refuse, .init = refuse_setup, .fini = ct_rmdir);

Test(conf_refuse, missing_manifest)
{
	struct conf_snapshot *s;

	write_config("permissive", "", "bad");
	s = load_dir();
	expect_refused(s, "/pkg/bad/manifest.ini: no such manifest");
	conf_snapshot_free(s);
}

Test(conf_refuse, broken_manifest_names_file_and_line)
{
	struct conf_snapshot *s;

	write_config("permissive", "", "bad");
	ct_write_str("pkg/bad/manifest.ini",
	    "[plugin]\nname = bad\nversion "
	    "= 1\n[egress]\nhosts = *\n");
	s = load_dir();
	expect_refused(s, "/pkg/bad/manifest.ini:5: [egress] hosts: '*': ");
	conf_snapshot_free(s);
}

Test(conf_refuse, plugin_name_mismatch)
{
	struct conf_snapshot *s;
	char want[512];

	write_config("permissive", "", "other");
	ct_write_str("pkg/bad/manifest.ini",
	    "[plugin]\nname = bad\nversion "
	    "= 1\n");
	s = load_dir();
	(void)snprintf(want, sizeof(want),
	    "%s:2: [plugin] name: 'bad' is not "
	    "the entry's plugin 'other' (%s:8); this manifest is refused for "
	    "instance 'bad'",
	    ct_path("pkg/bad/manifest.ini"), ct_path("egressd.ini"));
	expect_refused(s, want);
	conf_snapshot_free(s);
}

Test(conf_refuse, signatures_under_each_mode)
{
	EVP_PKEY *trusted = ct_keygen("ED25519"),
		 *other = ct_keygen("ED25519");
	struct conf_snapshot *s;
	const struct conf_instance *b;
	static const char keys[] = "trusted_keys = k.pem\n";
	static const char bad[] = "[plugin]\nname = bad\nversion = 1\n"
				  "[egress]\nhosts = api.bad.example\n";

	ct_write_pubkey(trusted, "k.pem");
	ct_sign_file(trusted, "pkg/good/manifest.ini");

	/* Unsigned: accepted and reported in permissive, refused in strict. */
	ct_write_str("pkg/bad/manifest.ini", bad);
	write_config("permissive", keys, "bad");
	s = load_dir();
	b = conf_instance_find(s, "bad");
	cr_assert_not_null(b->manifest);
	cr_expect_eq(b->manifest->sig, CONF_SIG_UNSIGNED);
	cr_expect_eq(conf_instance_find(s, "good")->manifest->sig,
	    CONF_SIG_VALID);
	conf_snapshot_free(s);
	write_config("strict", keys, "bad");
	s = load_dir();
	expect_refused(s, "unsigned (no ");
	conf_snapshot_free(s);

	/* Wrong key: refused in both. */
	ct_sign_file(other, "pkg/bad/manifest.ini");
	write_config("permissive", keys, "bad");
	s = load_dir();
	expect_refused(s, "untrusted signature");
	conf_snapshot_free(s);

	/* Tampered after signing (in [egress]): refused; disabled: taken. */
	ct_sign_file(trusted, "pkg/bad/manifest.ini");
	ct_write_str("pkg/bad/manifest.ini",
	    "[plugin]\nname = bad\nversion = "
	    "1\n[egress]\nhosts = api.bad.exampl\n");
	write_config("strict", keys, "bad");
	s = load_dir();
	expect_refused(s, "untrusted signature");
	conf_snapshot_free(s);
	write_config("disabled", keys, "bad");
	s = load_dir();
	b = conf_instance_find(s, "bad");
	cr_assert_not_null(b->manifest);
	cr_expect_eq(b->manifest->sig, CONF_SIG_NOT_CHECKED);
	conf_snapshot_free(s);

	EVP_PKEY_free(trusted);
	EVP_PKEY_free(other);
}

/* The fixture's .sig files were made once with the openssl CLI: a copy
 * verifies in strict mode, and one changed byte in [egress] is refused. */
Test(conf_refuse, cli_made_fixture_signatures_verify)
{
	struct conf_snapshot *s;
	struct conf_file_id id;
	char *text, *sig, cfg[1024];
	size_t len, siglen;

	fixture_key_guard();
	memset(&id, 0, sizeof(id));
	cr_assert_eq(conf_read_file(GOOD "/packages/weather/manifest.ini",
			 CONF_MANIFEST_MAX, &text, &len, &id),
	    0);
	cr_assert_eq(conf_read_file(GOOD "/packages/weather/manifest.ini.sig",
			 CONF_SIG_FILE_MAX, &sig, &siglen, &id),
	    0);
	(void)snprintf(cfg, sizeof(cfg),
	    "[plugins.security]\nsignature_mode = "
	    "strict\ntrusted_keys = %s/keys/release.pem\n"
	    "[plugins.entries.weather]\nplugin = weather\nmanifest = "
	    "w/manifest.ini\n",
	    GOOD);
	ct_write_str("egressd.ini", cfg);
	ct_write("w/manifest.ini", text, len);
	ct_write("w/manifest.ini.sig", sig, siglen);
	s = load_dir();
	cr_assert_not_null(conf_instance_find(s, "weather")->manifest);
	cr_expect_eq(conf_instance_find(s, "weather")->manifest->sig,
	    CONF_SIG_VALID);
	conf_snapshot_free(s);

	*strstr(text, "tiles") = 'T';
	ct_write("w/manifest.ini", text, len);
	s = load_dir();
	cr_expect_null(conf_instance_find(s, "weather")->manifest);
	cr_expect(strstr(conf_instance_find(s, "weather")->manifest_error,
		      "untrusted signature") != NULL);
	conf_snapshot_free(s);
	free(text);
	free(sig);
}

/* ---- Staleness ------------------------------------------------------------ */

static void
stale_setup(void)
{
	ct_mkdir();
	ct_write_str("pkg/good/manifest.ini", good_manifest);
	conf_set_racy_window_ns(0);
}

static void
stale_teardown(void)
{
	conf_set_racy_window_ns(1000000000);
	ct_rmdir();
}

TestSuite(conf_stale, .init = stale_setup, .fini = stale_teardown);

Test(conf_stale, unchanged_is_not_stale)
{
	struct conf_snapshot *s;

	write_config("permissive", "", "bad");
	s = load_dir();
	cr_expect_eq(s->nfiles, 5); /* config, 2 manifests, 2 .sig */
	cr_expect_eq(conf_snapshot_is_stale(s), 0);
	cr_expect_eq(conf_snapshot_is_stale(s), 0);
	conf_snapshot_free(s);
}

/* Files read within the racy window: unchanged bytes are not a change
 * (no re-parse storm after an edit), but bytes that differ behind an
 * unchanged identity are. */
Test(conf_stale, racy_unchanged_is_not_stale)
{
	struct conf_snapshot *s;
	size_t i;

	conf_set_racy_window_ns(3600LL * 1000000000);
	write_config("permissive", "", "bad");
	s = load_dir();
	for (i = 0; i < s->nfiles; i++)
		if (s->files[i].exists)
			cr_expect(s->files[i].racy && s->files[i].has_digest,
			    "%s", s->files[i].path);
	cr_expect_eq(conf_snapshot_is_stale(s), 0);
	cr_expect_eq(conf_snapshot_is_stale(s), 0);
	/* What the digest stands for: the bytes as they were read. */
	s->files[0].digest[0] ^= 1;
	cr_expect_eq(conf_snapshot_is_stale(s), 1);
	s->files[0].digest[0] ^= 1;
	cr_expect_eq(conf_snapshot_is_stale(s), 0);
	write_config("strict", "", "bad");
	cr_expect_eq(conf_snapshot_is_stale(s), 1);
	conf_snapshot_free(s);
}

/* A racy file whose bytes still match once the window has passed is
 * settled: later checks trust its stat identity (no re-read per request),
 * and a rewrite is still seen through it. */
Test(conf_stale, racy_file_settles)
{
	struct conf_snapshot *s;
	size_t i;

	conf_set_racy_window_ns(3600LL * 1000000000);
	write_config("permissive", "", "bad");
	s = load_dir();
	cr_expect_eq(conf_snapshot_is_stale(s), 0);
	for (i = 0; i < s->nfiles; i++)
		if (s->files[i].exists)
			cr_expect(s->files[i].racy, "%s", s->files[i].path);
	/* The window passes: the next check settles every file. */
	conf_set_racy_window_ns(0);
	cr_expect_eq(conf_snapshot_is_stale(s), 0);
	for (i = 0; i < s->nfiles; i++)
		cr_expect(!s->files[i].racy, "%s", s->files[i].path);
	/* Settled, the digest is no longer consulted ... */
	s->files[0].digest[0] ^= 1;
	cr_expect_eq(conf_snapshot_is_stale(s), 0);
	s->files[0].digest[0] ^= 1;
	/* ... and a rewrite is still a change. */
	write_config("strict", "", "bad");
	cr_expect_eq(conf_snapshot_is_stale(s), 1);
	conf_snapshot_free(s);
}

/* A racy file whose bytes changed is never settled. */
Test(conf_stale, racy_changed_bytes_do_not_settle)
{
	struct conf_snapshot *s;

	conf_set_racy_window_ns(3600LL * 1000000000);
	write_config("permissive", "", "bad");
	s = load_dir();
	s->files[0].digest[0] ^= 1;
	conf_set_racy_window_ns(0);
	cr_expect_eq(conf_snapshot_is_stale(s), 1);
	cr_expect(s->files[0].racy);
	conf_snapshot_free(s);
}

/* Per instance: the configuration and that instance's own manifest and
 * .sig are checked, another instance's manifest is not. */
Test(conf_stale, per_instance_files)
{
	struct conf_snapshot *s;

	write_config("permissive", "", "bad");
	s = load_dir();
	cr_expect_eq(conf_snapshot_is_stale_for(s, "good"), 0);
	cr_expect_eq(conf_snapshot_is_stale_for(s, "bad"), 0);
	/* good's manifest changes: only good (and the full check) see it. */
	ct_write_str("pkg/good/manifest.ini",
	    "[plugin]\nname = good\n"
	    "version = 2\npermissions = http_client\n");
	cr_expect_eq(conf_snapshot_is_stale_for(s, "bad"), 0);
	cr_expect_eq(conf_snapshot_is_stale_for(s, "good"), 1);
	cr_expect_eq(conf_snapshot_is_stale(s), 1);
	/* Unknown or no instance: every file. */
	cr_expect_eq(conf_snapshot_is_stale_for(s, "nosuch"), 1);
	cr_expect_eq(conf_snapshot_is_stale_for(s, NULL), 1);
	conf_snapshot_free(s);

	s = load_dir();
	cr_expect_eq(conf_snapshot_is_stale_for(s, "bad"), 0);
	/* A .sig appearing next to a manifest is that instance's change. */
	ct_write_str("pkg/good/manifest.ini.sig", "x");
	cr_expect_eq(conf_snapshot_is_stale_for(s, "bad"), 0);
	cr_expect_eq(conf_snapshot_is_stale_for(s, "good"), 1);
	conf_snapshot_free(s);

	s = load_dir();
	/* The configuration itself is every instance's. */
	write_config("strict", "", "bad");
	cr_expect_eq(conf_snapshot_is_stale_for(s, "bad"), 1);
	cr_expect_eq(conf_snapshot_is_stale_for(s, "good"), 1);
	conf_snapshot_free(s);
}

Test(conf_stale, rewritten_config_is_stale)
{
	struct conf_snapshot *s;

	write_config("permissive", "", "bad");
	s = load_dir();
	cr_assert_eq(conf_snapshot_is_stale(s), 0);
	write_config("strict", "", "bad");
	cr_expect_eq(conf_snapshot_is_stale(s), 1);
	conf_snapshot_free(s);
}

Test(conf_stale, replaced_config_same_size_is_stale)
{
	struct conf_snapshot *s;
	char a[512], b[512];

	write_config("permissive", "", "bad");
	s = load_dir();
	cr_assert_eq(conf_snapshot_is_stale(s), 0);
	/* Same bytes into a new file renamed over it: a new inode. */
	(void)snprintf(a, sizeof(a), "%s", ct_path("egressd.ini"));
	(void)snprintf(b, sizeof(b), "%s", ct_path("new.ini"));
	cr_assert_eq(link(a, b), 0);
	cr_assert_eq(unlink(a), 0);
	write_config("permissive", "", "bad");
	cr_expect_eq(conf_snapshot_is_stale(s), 1);
	conf_snapshot_free(s);
}

Test(conf_stale, rewritten_manifest_is_stale)
{
	struct conf_snapshot *s;

	write_config("permissive", "", "bad");
	s = load_dir();
	cr_assert_eq(conf_snapshot_is_stale(s), 0);
	ct_write_str("pkg/good/manifest.ini", "[plugin]\nname = good\n");
	cr_expect_eq(conf_snapshot_is_stale(s), 1);
	conf_snapshot_free(s);
}

Test(conf_stale, created_manifest_and_sig_are_stale)
{
	struct conf_snapshot *s;

	write_config("permissive", "", "bad");
	s = load_dir();
	cr_assert_eq(conf_snapshot_is_stale(s), 0);
	/* The missing manifest of "bad" appears. */
	ct_write_str("pkg/bad/manifest.ini", "[plugin]\nname = bad\n");
	cr_expect_eq(conf_snapshot_is_stale(s), 1);
	conf_snapshot_free(s);

	s = load_dir();
	cr_assert_eq(conf_snapshot_is_stale(s), 0);
	ct_write_str("pkg/good/manifest.ini.sig", "x\n");
	cr_expect_eq(conf_snapshot_is_stale(s), 1);
	conf_snapshot_free(s);

	s = load_dir();
	cr_assert_eq(conf_snapshot_is_stale(s), 0);
	cr_assert_eq(unlink(ct_path("pkg/good/manifest.ini.sig")), 0);
	cr_expect_eq(conf_snapshot_is_stale(s), 1);
	conf_snapshot_free(s);
}

Test(conf_stale, rewritten_key_is_stale)
{
	EVP_PKEY *k = ct_keygen("ED25519");
	struct conf_snapshot *s;

	ct_write_pubkey(k, "k.pem");
	write_config("permissive", "trusted_keys = k.pem\n", "bad");
	s = load_dir();
	cr_expect_eq(s->nfiles, 6);
	cr_assert_eq(conf_snapshot_is_stale(s), 0);
	ct_write_str("k.pem", "");
	cr_expect_eq(conf_snapshot_is_stale(s), 1);
	conf_snapshot_free(s);
	EVP_PKEY_free(k);
}

/* ---- Misc --------------------------------------------------------------- */

Test(conf_config, instances_sorted_and_found)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors e = { 0 };
	static const char in[] =
	    "[plugins.entries.zeta]\nplugin = z\nmanifest = m\n"
	    "[plugins.entries.alpha]\nplugin = a\nmanifest = m\n"
	    "[plugins.entries.mid.1]\nplugin = m\nmanifest = m\n";

	cr_assert_eq(load_text(in, &s, &e), 0, "%s", ct_errors(&e));
	cr_assert_eq(s->ninstances, 3);
	cr_expect_str_eq(s->instances[0].name, "alpha");
	cr_expect_str_eq(s->instances[1].name, "mid.1");
	cr_expect_str_eq(s->instances[2].name, "zeta");
	cr_expect_eq(conf_instance_find(s, "mid.1")->line, 7);
	cr_expect_null(conf_instance_find(s, "mid"));
	cr_expect_null(conf_instance_find(s, ""));
	conf_snapshot_free(s);
}

Test(conf_config, relative_config_path_resolves_against_cwd)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors e = { 0 };
	char cwd[512], want[600];

	cr_assert_not_null(getcwd(cwd, sizeof(cwd)));
	cr_assert_eq(conf_load_buffer("sub/c.ini", "[tls]\nca_file = ca.pem\n",
			 23, &s, &e),
	    0, "%s", ct_errors(&e));
	(void)snprintf(want, sizeof(want), "%s/sub/ca.pem", cwd);
	cr_expect_str_eq(s->ca_file, want);
	conf_snapshot_free(s);
	s = NULL;
	cr_assert_eq(conf_load_buffer("c.ini",
			 "[tls]\nca_file = /etc/ca.pem\n", 27, &s, &e),
	    0, "%s", ct_errors(&e));
	cr_expect_str_eq(s->ca_file, "/etc/ca.pem");
	cr_expect_str_eq(s->dir, cwd);
	conf_snapshot_free(s);
}

Test(conf_config, default_path)
{
	cr_expect_str_eq(conf_default_path("x.ini"), "x.ini");
	cr_assert_eq(setenv("EGRESSD_CONFIG", "/tmp/e.ini", 1), 0);
	cr_expect_str_eq(conf_default_path(NULL), "/tmp/e.ini");
	cr_assert_eq(setenv("EGRESSD_CONFIG", "", 1), 0);
	cr_expect_str_eq(conf_default_path(NULL), CONF_DEFAULT_PATH);
	cr_assert_eq(unsetenv("EGRESSD_CONFIG"), 0);
	/* The build's SYSCONFDIR/egressd/egressd.ini, the file meson
	 * installs and the unit names. */
	cr_expect_eq(conf_default_path(NULL)[0], '/');
	cr_expect_str_eq(conf_default_path(NULL) +
		strlen(conf_default_path(NULL)) -
		strlen("/egressd/egressd.ini"),
	    "/egressd/egressd.ini");
}

Test(conf_config, psl_callback)
{
	cr_expect_eq(conf_psl_is_public_suffix(NULL, "com"), 1);
	cr_expect_eq(conf_psl_is_public_suffix(NULL, "co.uk"), 1);
	cr_expect_eq(conf_psl_is_public_suffix(NULL, "example.com"), 0);
	/* Private-section suffixes do not count. */
	cr_expect_eq(conf_psl_is_public_suffix(NULL, "s3.amazonaws.com"), 0);
	/* No implicit "*" rule: an unlisted TLD is not a public suffix. */
	cr_expect_eq(conf_psl_is_public_suffix(NULL, "internal"), 0);
}

Test(conf_config, bundled_example_loads)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors e = { 0 };

	cr_assert_eq(conf_load(SRCDIR "/examples/egressd.ini", &s, &e), 0,
	    "%s", ct_errors(&e));
	cr_expect_gt(s->ninstances, 0);
	conf_snapshot_free(s);
}

Test(conf_stale, relative_config_path_is_recorded_absolute)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors e = { 0 };

	write_config("permissive", "", "bad");
	cr_assert_eq(chdir(ct_dir), 0);
	cr_assert_eq(conf_load("egressd.ini", &s, &e), 0, "%s", ct_errors(&e));
	cr_expect_str_eq(s->path, "egressd.ini");
	cr_expect_str_eq(s->files[0].path, ct_path("egressd.ini"));
	cr_assert_eq(chdir("/"), 0);
	cr_expect_eq(conf_snapshot_is_stale(s), 0);
	conf_snapshot_free(s);
}

/* ---- The proxy token file ---------------------------------------------- */

TestSuite(conf_token, .init = ct_mkdir, .fini = ct_rmdir);

static int
load_token_conf(const char *token, mode_t mode, struct conf_snapshot **s,
    struct conf_errors *e)
{
	char text[512];

	ct_write_str("t", token);
	cr_assert_eq(chmod(ct_path("t"), mode), 0);
	(void)snprintf(text, sizeof(text),
	    "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
	    "proxy_listen = 127.0.0.1:3128\nproxy_token_file = t\n"
	    "[plugins.entries.y]\nplugin = y\nmanifest = m\n"
	    "proxy_listen = 127.0.0.1:3129\nproxy_token_file = %s\n",
	    ct_path("t"));
	return conf_load_buffer(ct_path("c.ini"), text, strlen(text), s, e);
}

Test(conf_token, read_when_only_the_owner_may)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors e = { 0 };
	const struct conf_instance *ci;

	cr_assert_eq(load_token_conf("0123456789abcdef\n", 0600, &s, &e), 0,
	    "%s", ct_errors(&e));
	ci = conf_instance_find(s, "x");
	cr_assert_not_null(ci);
	cr_expect_str_eq(ci->proxy_listen, "127.0.0.1:3128");
	cr_expect_str_eq(ci->proxy_token, "0123456789abcdef");
	conf_snapshot_free(s);
}

Test(conf_token, refused_when_group_or_world_may_read_or_too_short)
{
	static const struct {
		const char *token;
		mode_t mode;
		const char *why;
	} cases[] = {
		{ "0123456789abcdef\n", 0640,
		    "is group- or world-accessible; "
		    "chmod 600 it" },
		{ "0123456789abcdef\n", 0604,
		    "is group- or world-accessible; "
		    "chmod 600 it" },
		{ "short\n", 0600,
		    "must hold one line of 16 to 256 visible "
		    "ASCII characters" },
		{ "0123456789 abcdef\n", 0600,
		    "must hold one line of 16 to "
		    "256 visible ASCII characters" },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct conf_snapshot *s = NULL;
		struct conf_errors e = { 0 };
		char want[512];

		cr_assert_eq(load_token_conf(cases[i].token, cases[i].mode, &s,
				 &e),
		    EGRESS_ERR_INVALID, "case %zu", i);
		(void)snprintf(want, sizeof(want),
		    "%s:5: [plugins.entries.x] proxy_token_file: %s %s",
		    ct_path("c.ini"), ct_path("t"), cases[i].why);
		cr_expect_str_eq(e.msgs[0], want, "case %zu", i);
		conf_errors_done(&e);
	}
}

static int
load_parent_conf(const char *cred, mode_t mode, struct conf_snapshot **s,
    struct conf_errors *e)
{
	char text[512];

	ct_write_str("cred", cred);
	cr_assert_eq(chmod(ct_path("cred"), mode), 0);
	(void)snprintf(text, sizeof(text),
	    "[upstream_proxy]\nurl = http://[fd00::1]:3128\n"
	    "credentials_file = cred\n");
	return conf_load_buffer(ct_path("c.ini"), text, strlen(text), s, e);
}

/* The parent's address and port, and its credentials as the
 * Proxy-Authorization value; never a name. */
Test(conf_token, upstream_proxy_and_credentials)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors e = { 0 };
	char a[64];

	cr_assert_eq(load_parent_conf("user:pass word\n", 0600, &s, &e),
	    EGRESS_ERR_INVALID, "a space is not visible ASCII");
	conf_errors_done(&e);
	cr_assert_eq(load_parent_conf("user:secret\n", 0600, &s, &e), 0, "%s",
	    ct_errors(&e));
	cr_expect_str_eq(s->upstream_proxy_url, "http://[fd00::1]:3128");
	cr_assert_eq(policy_addr_format(&s->upstream_proxy_addr, a, sizeof(a)),
	    0);
	cr_expect_str_eq(a, "fd00::1");
	cr_expect_eq(s->upstream_proxy_port, 3128);
	/* base64("user:secret") */
	cr_expect_str_eq(s->upstream_proxy_auth, "Basic dXNlcjpzZWNyZXQ=");
	conf_snapshot_free(s);
}

Test(conf_token, upstream_proxy_credentials_refused)
{
	static const struct {
		const char *cred;
		mode_t mode;
		const char *why;
	} cases[] = {
		{ "user:secret\n", 0640,
		    "is group- or world-accessible; chmod 600 it" },
		{ "usersecret\n", 0600,
		    "must hold one line USER:PASSWORD of 3 to 256 visible ASCII "
		    "characters" },
		{ ":secret\n", 0600,
		    "must hold one line USER:PASSWORD of 3 to 256 visible ASCII "
		    "characters" },
		{ "ab:\n", 0600, NULL },
	};
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct conf_snapshot *s = NULL;
		struct conf_errors e = { 0 };
		char want[512];

		if (cases[i].why == NULL) {
			/* An empty password is the parent's business. */
			cr_assert_eq(load_parent_conf(cases[i].cred,
					 cases[i].mode, &s, &e),
			    0, "%s", ct_errors(&e));
			conf_snapshot_free(s);
			continue;
		}
		cr_assert_eq(load_parent_conf(cases[i].cred, cases[i].mode, &s,
				 &e),
		    EGRESS_ERR_INVALID, "case %zu", i);
		(void)snprintf(want, sizeof(want),
		    "%s:3: [upstream_proxy] credentials_file: %s %s",
		    ct_path("c.ini"), ct_path("cred"), cases[i].why);
		cr_expect_str_eq(e.msgs[0], want, "case %zu", i);
		conf_errors_done(&e);
	}
}

/* In the broker (conf_key_owner_require()), a token or credentials file
 * another user owns is refused: that user may read it, and rewrite it
 * between reloads. Owned by the broker's user, it is taken. */
Test(conf_token, a_secret_another_user_owns_is_refused)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors e = { 0 };
	char want[512];

	conf_key_owner_require(geteuid());
	cr_assert_eq(load_token_conf("0123456789abcdef\n", 0600, &s, &e), 0,
	    "%s", ct_errors(&e));
	conf_snapshot_free(s);
	s = NULL;
	conf_key_owner_require(geteuid() + 1);
	cr_assert_eq(load_token_conf("0123456789abcdef\n", 0600, &s, &e),
	    EGRESS_ERR_INVALID);
	(void)snprintf(want, sizeof(want),
	    "%s:5: [plugins.entries.x] proxy_token_file: %s is owned by "
	    "another user than the broker's, who may read it; chown it to "
	    "the broker's user",
	    ct_path("c.ini"), ct_path("t"));
	cr_expect_str_eq(e.msgs[0], want);
	conf_errors_done(&e);
	cr_assert_eq(load_parent_conf("user:secret\n", 0600, &s, &e),
	    EGRESS_ERR_INVALID);
	(void)snprintf(want, sizeof(want),
	    "%s:3: [upstream_proxy] credentials_file: %s is owned by another "
	    "user than the broker's, who may read it; chown it to the "
	    "broker's user",
	    ct_path("c.ini"), ct_path("cred"));
	cr_expect_str_eq(e.msgs[0], want);
	conf_errors_done(&e);
}

Test(conf_token, one_address_per_entry)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors e = { 0 };
	char text[512];

	ct_write_str("t", "0123456789abcdef\n");
	cr_assert_eq(chmod(ct_path("t"), 0600), 0);
	(void)snprintf(text, sizeof(text),
	    "[plugins.entries.x]\nplugin = x\nmanifest = m\n"
	    "proxy_listen = 127.0.0.1:3128\nproxy_token_file = t\n"
	    "[plugins.entries.y]\nplugin = y\nmanifest = m\n"
	    "proxy_listen = 127.0.0.1:3128\nproxy_token_file = t\n");
	cr_assert_eq(conf_load_buffer(ct_path("c.ini"), text, strlen(text), &s,
			 &e),
	    EGRESS_ERR_INVALID);
	cr_expect(strstr(ct_errors(&e),
		      "[plugins.entries.y] proxy_listen: "
		      "127.0.0.1:3128 is already the proxy "
		      "address of [plugins.entries.x]") != NULL,
	    "%s", ct_errors(&e));
	conf_errors_done(&e);
}

/* A FIFO named as the token file is refused at once (never opened for a
 * blocking read that would hang the reload). */
Test(conf_token, a_fifo_is_refused_without_blocking, .timeout = 10)
{
	const char *why = NULL;

	cr_assert_eq(mkfifo(ct_path("fifo"), 0600), 0);
	cr_assert_null(conf_token_read(ct_path("fifo"), &why));
	cr_assert_str_eq(why, "is not a regular file");
}

/* The same for the files the configuration reads whole (manifests,
 * signatures, keys, the configuration itself). */
Test(conf_token, a_fifo_is_not_read_as_a_config_file, .timeout = 10)
{
	struct conf_file_id id = { 0 };
	char *buf = NULL;
	size_t len = 0;

	cr_assert_eq(mkfifo(ct_path("fifo"), 0600), 0);
	cr_assert_eq(conf_read_file(ct_path("fifo"), 4096, &buf, &len, &id),
	    EGRESS_ERR_IO);
	cr_assert_null(buf);
}

/* A rotated token file makes the snapshot stale, as an edit of the
 * configuration does: the next request reloads and sees the new token. */
Test(conf_token, rewriting_the_token_file_makes_the_snapshot_stale)
{
	struct conf_snapshot *s = NULL;
	struct conf_errors e = { 0 };

	cr_assert_eq(load_token_conf("0123456789abcdef\n", 0600, &s, &e), 0,
	    "%s", ct_errors(&e));
	cr_assert_not(conf_snapshot_is_stale(s));
	ct_write_str("t", "fedcba9876543210-rotated\n");
	cr_assert_eq(chmod(ct_path("t"), 0600), 0);
	cr_assert(conf_snapshot_is_stale(s));
	cr_assert(conf_snapshot_is_stale_for(s, "x"));
	conf_snapshot_free(s);
}
