# Cross-compiles the library for 64-bit Windows with mingw-w64 (Debian's
# g++-mingw-w64-x86-64), as .ci/run does to check that the Winsock code
# compiles and links (it is not run there):
#   cmake -S clients/cpp -B build-win -DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64-x86_64.cmake \
#         -DTICKWHEEL_TLS=OFF -DTICKWHEEL_BUILD_TESTS=OFF
# msgpack-cxx is header-only: MSGPACK_INCLUDE_DIR defaults to the host's
# /usr/include, searched after the compiler's own headers (CMakeLists.txt).
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(TICKWHEEL_MINGW_PREFIX x86_64-w64-mingw32)
# The -posix flavour: std::thread and std::mutex need GCC's posix thread
# model with mingw-w64 (the -win32 flavour of GCC 12 has neither).
find_program(CMAKE_CXX_COMPILER NAMES ${TICKWHEEL_MINGW_PREFIX}-g++-posix ${TICKWHEEL_MINGW_PREFIX}-g++ REQUIRED)
find_program(CMAKE_RC_COMPILER NAMES ${TICKWHEEL_MINGW_PREFIX}-windres)
set(CMAKE_FIND_ROOT_PATH /usr/${TICKWHEEL_MINGW_PREFIX})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(MSGPACK_INCLUDE_DIR /usr/include CACHE PATH "msgpack-cxx's headers (the host's: header-only)")
