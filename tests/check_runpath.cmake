# Fails when a built library has an empty entry in its RUNPATH or RPATH: the dynamic loader
# reads an empty entry as the current directory, so a bare-name dlopen from that library
# (libpackfn's pf_module_load of "libfoo.so") would search wherever the program was started.
# With EXPECT, the RUNPATH must be exactly that (libpackfn's: $ORIGIN, its own folder).
#   cmake -DFILES=<file;file;...> -P check_runpath.cmake
set(bad 0)
foreach(f IN LISTS FILES)
  file(READ_ELF "${f}" RUNPATH runpath RPATH rpath CAPTURE_ERROR err)
  if(err)
    message(SEND_ERROR "${f}: ${err}")
    set(bad 1)
    continue()
  endif()
  foreach(path IN ITEMS "${runpath}" "${rpath}")
    if(path MATCHES "^[:;]|[:;][:;]|[:;]$")
      message(SEND_ERROR "${f}: empty entry (the current directory) in '${path}'")
      set(bad 1)
    endif()
  endforeach()
  if(DEFINED EXPECT AND NOT "${runpath}${rpath}" STREQUAL "${EXPECT}")
    message(SEND_ERROR "${f}: expected RUNPATH '${EXPECT}', got '${runpath}${rpath}'")
    set(bad 1)
  endif()
  message(STATUS "${f}: RUNPATH '${runpath}' RPATH '${rpath}'")
endforeach()
if(bad)
  message(FATAL_ERROR "RUNPATH check failed (see above)")
endif()
