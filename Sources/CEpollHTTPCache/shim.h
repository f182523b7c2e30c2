// Glibc's Swift module does not cover <sys/epoll.h>, <sys/eventfd.h>, <sys/timerfd.h> or <malloc.h>, and
// accept4 and dup3 need _GNU_SOURCE. Declarations only: everything here is in glibc itself.
#include <malloc.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
extern int accept4(int, struct sockaddr *, socklen_t *, int);
extern int dup3(int, int, int);
static inline int csocket_accept4(int fd, int flags) { return accept4(fd, 0, 0, flags); }
