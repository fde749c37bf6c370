/* SPDX-License-Identifier: ISC */
/*
 * The loopback TCP ports of the proxy front (see proxy_port.h), one
 * evconnlistener each, kept in step with the configuration.
 */
#include <sys/socket.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <jansson.h>

#include <egress/error.h>

#include "broker/broker.h"
#include "broker/log.h"
#include "broker/proxy.h"
#include "broker/proxy_port.h"
#include "conf/conf.h"

#define PROXY_PORT_BACKLOG 128

struct proxy_port {
	struct proxy_port *next;
	struct broker *b;
	struct evconnlistener *l;
	char instance[CONF_NAME_MAX + 1];
	char *listen;
	int paused; /* PROXY_PREAUTH_MAX connections unauthenticated */
};

static void
port_event(const char *status, const char *instance, const char *listen,
    const char *error)
{
	json_t *o;

	o = json_pack("{s:s, s:s, s:s, s:s, s:s?}", "status", status, "what",
	    "proxy port", "instance", instance, "listen", listen, "error",
	    error);
	if (o != NULL)
		log_event("egress.listen", o);
}

static void
port_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct proxy_port *p = arg;

	/* Not activity: no caller on the port has shown its token yet. */
	(void)proxy_accept(p->b, fd, p->instance, NULL, PROXY_AUTH);
	/* Full: the next connections wait in the backlog, not refused. */
	if (proxy_preauth_count(p->b, p->instance) >= PROXY_PREAUTH_MAX &&
	    evconnlistener_disable(p->l) == 0)
		p->paused = 1;
}

void
proxy_ports_resume(struct broker *b, const char *instance)
{
	struct proxy_port *p;

	for (p = b->proxy_ports; p != NULL; p = p->next)
		if (p->paused && strcmp(p->instance, instance) == 0 &&
		    proxy_preauth_count(b, instance) < PROXY_PREAUTH_MAX &&
		    evconnlistener_enable(p->l) == 0)
			p->paused = 0;
}

static void
port_free(struct proxy_port *p, const char *why)
{
	if (p == NULL)
		return;
	if (why != NULL)
		port_event(why, p->instance, p->listen, NULL);
	if (p->l != NULL)
		evconnlistener_free(p->l);
	free(p->listen);
	free(p);
}

/* Bind a port for ci. Return 0 and write *ret, or an error (logged). */
static int
port_new(struct broker *b, const struct conf_instance *ci,
    struct proxy_port **ret)
{
	struct sockaddr_storage ss;
	struct proxy_port *p;
	int sl = (int)sizeof(ss);

	memset(&ss, 0, sizeof(ss));
	if (evutil_parse_sockaddr_port(ci->proxy_listen,
		(struct sockaddr *)&ss, &sl) != 0) {
		port_event("error", ci->name, ci->proxy_listen,
		    "not an address");
		return EGRESS_ERR_INVALID;
	}
	if ((p = calloc(1, sizeof(*p))) == NULL ||
	    (p->listen = strdup(ci->proxy_listen)) == NULL) {
		free(p);
		return EGRESS_ERR_NOMEM;
	}
	p->b = b;
	(void)snprintf(p->instance, sizeof(p->instance), "%s", ci->name);
	p->l = evconnlistener_new_bind(b->base, port_accept_cb, p,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_REUSEABLE,
	    PROXY_PORT_BACKLOG, (struct sockaddr *)&ss, sl);
	if (p->l == NULL) {
		port_event("error", ci->name, ci->proxy_listen,
		    strerror(errno));
		port_free(p, NULL);
		return EGRESS_ERR_IO;
	}
	port_event("listening", ci->name, ci->proxy_listen, NULL);
	*ret = p;
	return 0;
}

int
proxy_ports_apply(struct broker *b, const struct conf_snapshot *s)
{
	struct proxy_port **pp, *p, *keep = NULL, *fresh;
	const struct conf_instance *ci;
	size_t i;
	int err, first = 0;

	/* Close what s no longer asks for, or asks for elsewhere. */
	for (pp = &b->proxy_ports; (p = *pp) != NULL;) {
		ci = conf_instance_find(s, p->instance);
		if (ci != NULL && ci->proxy_listen != NULL &&
		    strcmp(ci->proxy_listen, p->listen) == 0) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		port_free(p, "closed");
	}
	/* Bind what is new. */
	for (i = 0; i < s->ninstances; i++) {
		ci = &s->instances[i];
		if (ci->proxy_listen == NULL)
			continue;
		for (p = b->proxy_ports; p != NULL; p = p->next)
			if (strcmp(p->instance, ci->name) == 0)
				break;
		if (p != NULL)
			continue;
		if ((err = port_new(b, ci, &fresh)) != 0) {
			if (first == 0)
				first = err;
			continue;
		}
		fresh->next = keep;
		keep = fresh;
	}
	while ((p = keep) != NULL) {
		keep = p->next;
		p->next = b->proxy_ports;
		b->proxy_ports = p;
	}
	return first;
}

void
proxy_ports_free(struct broker *b)
{
	struct proxy_port *p;

	while ((p = b->proxy_ports) != NULL) {
		b->proxy_ports = p->next;
		port_free(p, NULL);
	}
}
