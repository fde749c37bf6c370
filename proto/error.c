/* SPDX-License-Identifier: ISC */
/*
 * egress_strerror() and egress_err_code(): the names of the project's one
 * error enum. Guest-visible codes print as their stable wire names.
 */
#include <stddef.h>

#include <egress/error.h>

const char *
egress_err_code(int err)
{
	switch (err) {
	case EGRESS_ERR_DENIED:
		return "denied";
	case EGRESS_ERR_BUDGET_EXHAUSTED:
		return "budget-exhausted";
	case EGRESS_ERR_DNS_FAILED:
		return "dns-failed";
	case EGRESS_ERR_CONNECT_FAILED:
		return "connect-failed";
	case EGRESS_ERR_TLS_FAILED:
		return "tls-failed";
	case EGRESS_ERR_TIMEOUT:
		return "timeout";
	case EGRESS_ERR_UPSTREAM_PROTOCOL:
		return "upstream-protocol-error";
	case EGRESS_ERR_INVALID_REQUEST:
		return "invalid-request";
	case EGRESS_ERR_UNAVAILABLE:
		return "unavailable";
	case EGRESS_ERR_CANCELLED:
		return "cancelled";
	default:
		return NULL;
	}
}

const char *
egress_strerror(int err)
{
	const char *code;

	if (err == EGRESS_OK)
		return "ok";
	code = egress_err_code(err);
	if (code != NULL)
		return code;
	switch (err) {
	case EGRESS_ERR_INVALID:
		return "invalid argument or input";
	case EGRESS_ERR_NOMEM:
		return "out of memory";
	case EGRESS_ERR_IO:
		return "system call failed";
	case EGRESS_ERR_TOO_BIG:
		return "input over a bound";
	case EGRESS_ERR_PROTOCOL:
		return "protocol violation";
	case EGRESS_ERR_AGAIN:
		return "try again";
	case EGRESS_ERR_CLOSED:
		return "connection closed";
	case EGRESS_ERR_NOT_FOUND:
		return "not found";
	case EGRESS_ERR_EXISTS:
		return "already exists";
	default:
		return "unknown-error";
	}
}
