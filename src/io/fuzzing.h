/* Checksums in fuzz builds. A mutated input almost never carries a valid CRC, so a fuzzer
 * stopped at every checksum would never reach the parsing behind it. Fuzz builds (and only
 * they: tests/fuzz/CMakeLists.txt defines FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION, as
 * OSS-Fuzz does) get a switch the harness flips to run each input a second time with
 * checksum mismatches ignored. Normal builds compare, always. */
#ifndef EST_IO_FUZZING_H
#define EST_IO_FUZZING_H

#include <stdint.h>

#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
extern int est_fuzz_ignore_checksums;
#define EST_CHECKSUM_MISMATCH(stored, actual) ((stored) != (actual) && !est_fuzz_ignore_checksums)
#else
#define EST_CHECKSUM_MISMATCH(stored, actual) ((stored) != (actual))
#endif

#endif
