/* SPDX-License-Identifier: ISC */
/*
 * The guest of a connection that is gone (see guest.h): a request that
 * outlives its connection talks to this one, which sends nothing and
 * takes nothing.
 */
#include <stddef.h>
#include <stdint.h>

#include <egress/error.h>

#include "broker/guest.h"
#include "proto/proto.h"

static const char *
gone_instance(void *ctx)
{
	return ctx;
}

static struct proto_conn *
gone_proto(void *ctx)
{
	static struct proto_conn closed = { .state = PROTO_CONN_CLOSED };

	return &closed;
}

static int
gone_send(void *ctx, struct proto_stream *s, const struct proto_msg *m)
{
	return EGRESS_ERR_CLOSED;
}

static int
gone_send_data(void *ctx, struct proto_stream *s, struct evbuffer *buf,
    size_t n, uint8_t flags)
{
	return EGRESS_ERR_CLOSED;
}

static int
gone_send_error(void *ctx, struct proto_stream *s, uint32_t code)
{
	return EGRESS_ERR_CLOSED;
}

static void
gone_consumed(void *ctx, struct proto_stream *s, size_t n)
{
}

static int
gone_can_write(void *ctx)
{
	return 0;
}

const struct guest_ops guest_gone_ops = {
	.instance = gone_instance,
	.proto = gone_proto,
	.send = gone_send,
	.send_data = gone_send_data,
	.send_error = gone_send_error,
	.consumed = gone_consumed,
	.can_write = gone_can_write,
};
