// consumer.cc: consumer.c compiled as C++17, so that the public headers and macros are checked
// from a C++ translation unit too.
#include "consumer.c"
