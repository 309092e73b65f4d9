// How both binaries set glibc's malloc up for the messages they pass through (issue 14).
//
// A command's output travels in messages of up to 1 MiB: the agent's chunks and their
// envelopes, gRPC's read buffers, the Chunk's bytes, the operator's InvokeEvent serialized
// again. With glibc's dynamic thresholds a heap that held them is trimmed as soon as about
// 2 MiB lie free at its top, and the next message faults every page back in — about one page
// fault per 4 KiB streamed, measured at 60 000–130 000 faults per 512 MiB in the controller
// and in the agent. On a paravirtualised VM that was most of their CPU (the controller 6–10
// CPU-s per GiB instead of 2.3–2.8; docs/performance.md, stop 45).
//
// KeepMessageBuffersMapped fixes the mmap threshold at 8 MiB and keeps up to 32 MiB free at a
// heap's top before it is trimmed, so those buffers stay mapped from one message to the next.
// The cost: up to 32 MiB held free per malloc arena after a burst (the agent's idle release,
// agent/daemon/memory_trim.h, gives it back with malloc_trim). A threshold set in the
// environment (MALLOC_TRIM_THRESHOLD_, MALLOC_MMAP_THRESHOLD_, or either in GLIBC_TUNABLES)
// wins. Call first thing in main, before any thread.
#pragma once

namespace edge {

void KeepMessageBuffersMapped();

// Whether those variables' values (nullptr = unset) set either threshold themselves.
bool MallocThresholdSetByEnvironment(const char* trim_threshold, const char* mmap_threshold,
                                     const char* glibc_tunables);

}  // namespace edge
