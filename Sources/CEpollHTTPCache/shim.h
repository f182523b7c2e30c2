// Glibc's Swift module does not cover <sys/epoll.h>, <sys/eventfd.h>, <sys/timerfd.h> or <malloc.h>, and
// accept4, dup3 and posix_spawn's _np file actions (the tests' ChildProcess) need _GNU_SOURCE.
// Declarations only: everything here is in glibc itself.
#include <malloc.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <spawn.h>
extern int accept4(int, struct sockaddr *, socklen_t *, int);
extern int dup3(int, int, int);
extern int posix_spawn_file_actions_addchdir_np(posix_spawn_file_actions_t *, const char *);
extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *, int);
static inline int csocket_accept4(int fd, int flags) { return accept4(fd, 0, 0, flags); }
