/* SPDX-License-Identifier: ISC */
/*
 * notify: the broker's service-manager notifications (libsystemd's
 * sd_notify). READY=1 once the configuration is loaded and every socket
 * (instance sockets and the control socket) is listening; STOPPING=1
 * when a drain begins. Without $NOTIFY_SOCKET (not run by systemd) every
 * call is a no-op. The variable is left in the environment: the broker
 * starts no children that could inherit and misuse it.
 */
#ifndef EGRESS_BROKER_NOTIFY_H
#define EGRESS_BROKER_NOTIFY_H

/*
 * Tell the service manager the broker is ready (READY=1, with MAINPID
 * and a STATUS line). Call after the sockets listen and the
 * configuration is loaded, and after any daemonising fork. Return 1 when
 * sent, 0 when there is no service manager, or EGRESS_ERR_IO.
 */
int notify_ready(void);

/* Tell the service manager the broker is stopping (STOPPING=1). Same
 * returns as notify_ready(). */
int notify_stopping(void);

/* Send a free-form STATUS= line (at most 200 bytes are sent). */
int notify_status(const char *text);

#endif /* EGRESS_BROKER_NOTIFY_H */
