/* SPDX-License-Identifier: ISC */
/*
 * revoke: decide an open connection again when a reload swapped a new
 * snapshot in, through the one decide path (decide.h), with the address
 * the connection uses standing for the answers: no new lookup, the same
 * rules as at its open (instance, permission, grant, declaration,
 * address class, carve-outs).
 */
#ifndef EGRESS_BROKER_REVOKE_H
#define EGRESS_BROKER_REVOKE_H

#include "broker/broker.h"
#include "conf/conf.h"
#include "policy/policy.h"

/*
 * Answer whether snapshot s (borrowed; NULL: the configuration is broken,
 * and nothing is allowed) still lets instance reach dest over transport
 * through the address connected, under the TLS profile tls_profile (""
 * or NULL: none) (1), or not (0, with the deny's reason code in
 * *ret_reason, a static string: a policy reason, "invalid-destination",
 * "policy-unavailable" or "tls-profile-not-allowed" when the entry no
 * longer lists the profile).
 */
int revoke_is_allowed(struct broker *b, const struct conf_snapshot *s,
    const char *instance, enum policy_transport transport,
    const struct policy_dest *dest, const struct policy_addr *connected,
    const char *tls_profile, const char **ret_reason);

#endif /* EGRESS_BROKER_REVOKE_H */
