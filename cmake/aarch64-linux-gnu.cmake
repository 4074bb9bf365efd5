# Cross build for 64-bit Arm Linux with Debian's cross compiler (g++-aarch64-linux-gnu), run under
# Debian's user-mode emulator (qemu-user):
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
# The target's libraries (libc, libstdc++, libgomp) come with the cross compiler under
# /usr/aarch64-linux-gnu. Header-only dependencies (nlohmann-json) are arch-independent: the
# cross compiler searches /usr/include last, so their host packages serve both builds. GoogleTest
# is compiled from Debian's packaged sources (/usr/src/googletest, see tests/CMakeLists.txt).
# cpp-httplib is a compiled library with no arm64 package here, so llama-server is not built.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER   aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

set(KILN_AARCH64_SYSROOT /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH ${KILN_AARCH64_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)   # build tools run on the host
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)    # libraries must be arm64 ones
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)    # nlohmann_json's CMake files in /usr/share/cmake

# CTest and gtest discovery start the arm64 binaries through the emulator. -cpu max enables every
# extension qemu knows (dotprod, i8mm, bf16, fp16, sve); KILN_CPU_ISA caps the level below that.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L ${KILN_AARCH64_SYSROOT} -cpu max)

# pkg-config would report the host's packages (x86-64 libraries): only the target's may be used.
set(ENV{PKG_CONFIG_LIBDIR} ${KILN_AARCH64_SYSROOT}/lib/pkgconfig)
