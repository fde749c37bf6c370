/* SPDX-License-Identifier: ISC */
/*
 * `egressctl check` and the broker agree: one matrix of instances
 * (every permission, each permission alone), destinations (a granted
 * loopback address with its carve-out, an address not granted, a
 * granted private address without one, the metadata address, a missing
 * port) and every transport the policy knows, each decided through
 * ctl_check_main() (the egressctl code path, --json) and through a real
 * session's REQUEST (the broker's path, its egress.decision event). The
 * verdicts and the reasons must be the same.
 */
#include "daemon_test.h"

#include <fcntl.h>
#include <jansson.h>

#include "broker/ctl/ctl.h"
#include "policy/policy.h"

static const char ck_manifest[] =
    "[plugin]\n"
    "name = unit\n"
    "version = 1.0.0\n"
    "permissions = http_client, websocket_client, socket_client\n"
    "[egress]\n"
    "operator_defined = true\n";

static const char *const ck_instances[] = { "every", "httponly", "wsonly",
	"sockonly" };

static void
ck_setup(void)
{
	char text[4096];
	const char *hosts = "egress_hosts = 127.0.0.1, 10.1.2.3, "
			    "169.254.169.254\n"
			    "egress_allow_loopback = 127.0.0.1\n"
			    "plugin = unit\n"
			    "manifest = manifest.ini\n";

	dt_setup();
	ct_write_str("manifest.ini", ck_manifest);
	(void)snprintf(text, sizeof(text),
	    "[plugins.security]\n"
	    "signature_mode = disabled\n"
	    "[plugins.limits]\n"
	    "max_connections_per_instance = 64\n"
	    "[plugins.entries.every]\n%s"
	    "permissions = http_client, websocket_client, socket_client\n"
	    "[plugins.entries.httponly]\n%s"
	    "permissions = http_client\n"
	    "[plugins.entries.wsonly]\n%s"
	    "permissions = websocket_client\n"
	    "[plugins.entries.sockonly]\n%s"
	    "permissions = socket_client\n"
	    "[broker]\n"
	    "instance_socket_dir = %s/run\n"
	    "control_socket = %s/control.sock\n"
	    "[resolver]\n"
	    "servers = 127.0.0.1:9\n"
	    "timeout_ms = 1000\n"
	    "[limits]\n"
	    "connect_timeout_ms = 5000\n",
	    hosts, hosts, hosts, hosts, ct_dir, ct_dir);
	ct_write_str("egressd.ini", text);
	confstate_reload(&dt_b.conf);
	cr_assert(confstate_is_valid(&dt_b.conf));
	cr_assert_eq(broker_apply_conf(&dt_b, dt_b.conf.cur->snap), 0);
}

TestSuite(check, .init = ck_setup, .fini = dt_teardown);

struct ck_verdict {
	char verdict[16];
	char reason[64]; /* "" on allow */
};

/* Decide through egressctl's code path: ctl_check_main() --json. */
static void
ck_ctl(const char *instance, enum policy_transport t, const char *dest,
    struct ck_verdict *ret)
{
	char conf[512], out[512], *argv[8];
	struct ctl_ctx ctx = { conf, "egressctl" };
	json_error_t jerr;
	json_t *o;
	int argc = 0, fd, saved;
	const char *s;

	(void)snprintf(conf, sizeof(conf), "%s", ct_path("egressd.ini"));
	(void)snprintf(out, sizeof(out), "%s", ct_path("check.out"));
	argv[argc++] = "check";
	argv[argc++] = "--json";
	if (t == POLICY_TRANSPORT_TCP || t == POLICY_TRANSPORT_TLS) {
		argv[argc++] = "--transport";
		argv[argc++] = (char *)policy_transport_name(t);
	}
	argv[argc++] = (char *)instance;
	argv[argc++] = (char *)dest;
	argv[argc] = NULL;
	(void)fflush(stdout);
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	cr_assert(fd >= 0);
	saved = dup(1);
	cr_assert(saved >= 0);
	cr_assert_eq(dup2(fd, 1), 1);
	(void)ctl_check_main(&ctx, argc, argv);
	(void)fflush(stdout);
	cr_assert_eq(dup2(saved, 1), 1);
	(void)close(saved);
	(void)close(fd);
	o = json_load_file(out, 0, &jerr);
	cr_assert_not_null(o, "egressctl check %s %s: no JSON (%s)", instance,
	    dest, jerr.text);
	s = json_string_value(json_object_get(o, "verdict"));
	cr_assert_not_null(s);
	(void)snprintf(ret->verdict, sizeof(ret->verdict), "%s", s);
	s = json_string_value(json_object_get(o, "reason"));
	(void)snprintf(ret->reason, sizeof(ret->reason), "%s",
	    s != NULL ? s : "");
	json_decref(o);
}

/* Decide through the broker: REQUEST stream sid on p, for the
 * destination (scheme, authority) over t; read its egress.decision. */
static void
ck_broker(struct dt_peer *p, uint32_t sid, enum policy_transport t,
    const char *scheme, const char *authority, struct ck_verdict *ret)
{
	static struct proto_msg m;
	size_t before = dt_log_count("egress.decision");
	int i;

	switch (t) {
	case POLICY_TRANSPORT_HTTP:
		dt_request(&m, sid, PROTO_FLAG_END_STREAM, "GET", scheme,
		    authority, "/", NULL);
		break;
	case POLICY_TRANSPORT_WEBSOCKET:
		dt_request(&m, sid, 0, "GET", scheme, authority, "/", NULL);
		m.request.transport = PROTO_TRANSPORT_WEBSOCKET;
		break;
	case POLICY_TRANSPORT_TCP:
	case POLICY_TRANSPORT_TLS:
		dt_request(&m, sid, 0, "", "", authority, "", NULL);
		m.request.transport = t == POLICY_TRANSPORT_TCP ?
		    PROTO_TRANSPORT_TCP :
		    PROTO_TRANSPORT_TLS;
		break;
	default:
		cr_assert_fail("no request form for transport %s",
		    policy_transport_name(t));
	}
	dt_send(p, &m);
	for (i = 0; i < DT_ITERS && dt_log_count("egress.decision") == before;
	     i++) {
		dt_peer_read(p);
		while (dt_take(p, &m))
			;
		dt_step(-1);
	}
	cr_assert_eq(dt_log_count("egress.decision"), before + 1,
	    "no decision for %s %s", policy_transport_name(t), authority);
	(void)snprintf(ret->verdict, sizeof(ret->verdict), "%s",
	    dt_log_last("egress.decision", "verdict"));
	(void)snprintf(ret->reason, sizeof(ret->reason), "%s",
	    dt_log_last("egress.decision", "reason"));
	/* m pointed into the caller's authority: keep no such pointer */
	memset(&m, 0, sizeof(m));
}

static size_t ck_rows, ck_allows;

/* Decide one row both ways and compare: instance over t to host (with
 * port, 0: none) in scheme ("" for HOST:PORT). */
static void
ck_row(struct dt_peer *p, uint32_t *sid, const char *instance,
    enum policy_transport t, const char *scheme, const char *host,
    unsigned port)
{
	char authority[64], dest[128];
	struct ck_verdict c, b;

	if (port != 0)
		(void)snprintf(authority, sizeof(authority), "%s:%u", host,
		    port);
	else
		(void)snprintf(authority, sizeof(authority), "%s", host);
	if (*scheme != '\0')
		(void)snprintf(dest, sizeof(dest), "%s://%s/", scheme,
		    authority);
	else
		(void)snprintf(dest, sizeof(dest), "%s", authority);
	ck_ctl(instance, t, dest, &c);
	ck_broker(p, *sid, t, scheme, authority, &b);
	*sid += 2;
	ck_rows++;
	ck_allows += strcmp(c.verdict, "allow") == 0;
	cr_expect_str_eq(b.verdict, c.verdict,
	    "%s %s %s: broker %s, egressctl %s", instance,
	    policy_transport_name(t), dest, b.verdict, c.verdict);
	cr_expect_str_eq(b.reason, c.reason,
	    "%s %s %s: broker '%s', egressctl '%s'", instance,
	    policy_transport_name(t), dest, b.reason, c.reason);
}

Test(check, egressctl_and_the_broker_agree_for_every_transport, .timeout = 120)
{
	static const char *const hosts[] = { "127.0.0.1", "127.0.0.2",
		"10.1.2.3", "169.254.169.254" };
	struct dt_peer *p = malloc(sizeof(*p));
	struct dt_upstream u;
	const char *schemes[2];
	size_t i, h, s, nschemes;
	uint32_t sid;
	int t;

	cr_assert_not_null(p);
	dt_upstream_open(&u); /* where allowed streams connect */
	for (i = 0; i < sizeof(ck_instances) / sizeof(ck_instances[0]); i++) {
		dt_peer_hello(p, ck_instances[i]);
		sid = 1;
		for (t = 1; strcmp(policy_transport_name(t), "unknown") != 0;
		     t++) {
			nschemes = 1;
			schemes[0] = "";
			if (t == POLICY_TRANSPORT_HTTP) {
				schemes[0] = "http";
				schemes[1] = "https";
				nschemes = 2;
			} else if (t == POLICY_TRANSPORT_WEBSOCKET) {
				schemes[0] = "ws";
				schemes[1] = "wss";
				nschemes = 2;
			}
			for (h = 0; h < sizeof(hosts) / sizeof(hosts[0]); h++)
				for (s = 0; s < nschemes; s++) {
					ck_row(p, &sid, ck_instances[i], t,
					    schemes[s], hosts[h], u.port);
					/* No port: the scheme's default, or
					 * invalid-destination for tcp and
					 * tls. */
					ck_row(p, &sid, ck_instances[i], t,
					    schemes[s], hosts[h], 0);
				}
		}
		dt_peer_close(p);
	}
	/* The matrix has both verdicts. */
	cr_assert_gt(ck_allows, 0);
	cr_assert_gt(ck_rows, ck_allows);
	dt_upstream_close(&u);
	free(p);
}
