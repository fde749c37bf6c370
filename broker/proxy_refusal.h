/* SPDX-License-Identifier: ISC */
/*
 * proxy_refusal: the egress.proxy events of refusals the proxy front
 * makes itself (no request reached the pipeline): instance, HTTP status,
 * error name, detail, and how many refusals the event stands for.
 */
#ifndef EGRESS_BROKER_PROXY_REFUSAL_H
#define EGRESS_BROKER_PROXY_REFUSAL_H

#include <stdint.h>

struct event_base;

/* The HTTP status a wire error code (PROTO_CODE_*) is answered with. */
unsigned proxy_refusal_status(uint32_t code);

/* Log one refusal of instance's front. */
void proxy_refusal_log(const char *instance, unsigned status,
    const char *error, const char *detail);

/*
 * Log a refusal of a caller not (yet) authenticated on a port: the first
 * of a burst at once, the ones within the next second counted and logged
 * together then (on base's loop), so that a flood costs one event per
 * second and none goes unreported.
 */
void proxy_refusal_log_unauth(struct event_base *base, const char *instance,
    unsigned status, const char *error, const char *detail);

#endif
