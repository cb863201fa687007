// The translation unit that makes suite_pch.hpp's precompiled header (tests/CMakeLists.txt);
// CMake includes the header into it.
