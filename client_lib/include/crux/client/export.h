// Symbol visibility of the crux_client shared library: it is built with -fvisibility=hidden and
// exports only what is marked CRUX_CLIENT_EXPORT (the C++ API in client.h / nccl.h and the C ABI
// in crux_client.h).
#ifndef CRUX_CLIENT_EXPORT_H_
#define CRUX_CLIENT_EXPORT_H_

#if defined(__GNUC__) || defined(__clang__)
#define CRUX_CLIENT_EXPORT __attribute__((visibility("default")))
#else
#define CRUX_CLIENT_EXPORT
#endif

#endif  // CRUX_CLIENT_EXPORT_H_
