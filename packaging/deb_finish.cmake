# CPACK_PRE_BUILD_SCRIPTS for the DEB generator: what Debian policy wants of
# the staged tree that a plain install does not do.  Runs with the staging
# directory in CPACK_TEMPORARY_DIRECTORY.
set(root "${CPACK_TEMPORARY_DIRECTORY}")
set(doc "${root}${CPACK_PACKAGING_INSTALL_PREFIX}/${CPACK_SHUNT_DOC_DIR}")
find_program(GZIP gzip REQUIRED)

# Man pages compressed, reproducibly (-n: no name, no time stamp).
file(GLOB_RECURSE pages "${root}/usr/share/man/*.[0-9]")
foreach(p IN LISTS pages)
  execute_process(COMMAND ${GZIP} -9nf "${p}" RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "gzip ${p} failed")
  endif()
endforeach()

file(MAKE_DIRECTORY "${doc}")
file(COPY "${CPACK_SHUNT_PACKAGING_DIR}/copyright" DESTINATION "${doc}")
file(READ "${CPACK_SHUNT_PACKAGING_DIR}/changelog.Debian" log)
string(REPLACE "@VERSION@" "${CPACK_PACKAGE_VERSION}-${CPACK_DEBIAN_PACKAGE_RELEASE}" log "${log}")
file(WRITE "${doc}/changelog.Debian" "${log}")
execute_process(COMMAND ${GZIP} -9nf "${doc}/changelog.Debian" RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "gzip changelog.Debian failed")
endif()
# The upstream changelog under the name Debian gives it, compressed.
file(RENAME "${doc}/CHANGELOG.md" "${doc}/changelog")
execute_process(COMMAND ${GZIP} -9nf "${doc}/changelog" RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "gzip changelog failed")
endif()
# The system configuration (a conffile, see conffiles) and the unit, with
# shuntd where the package puts it.  Debian 12 keeps units in /lib.
file(MAKE_DIRECTORY "${root}/etc/shunt" "${root}/lib/systemd/system"
     "${root}${CPACK_PACKAGING_INSTALL_PREFIX}/share/lintian/overrides")
file(COPY "${CPACK_SHUNT_SOURCE_DIR}/examples/shunt.conf" DESTINATION "${root}/etc/shunt")
file(READ "${CPACK_SHUNT_SOURCE_DIR}/examples/shuntd.service" unit)
string(REPLACE "/usr/local/sbin/shuntd" "${CPACK_PACKAGING_INSTALL_PREFIX}/${CPACK_SHUNT_SBINDIR}/shuntd" unit "${unit}")
file(WRITE "${root}/lib/systemd/system/shuntd.service" "${unit}")
file(WRITE "${doc}/examples/shuntd.service" "${unit}")
file(COPY "${CPACK_SHUNT_PACKAGING_DIR}/lintian-overrides" DESTINATION
     "${root}${CPACK_PACKAGING_INSTALL_PREFIX}/share/lintian/overrides")
file(RENAME "${root}${CPACK_PACKAGING_INSTALL_PREFIX}/share/lintian/overrides/lintian-overrides"
     "${root}${CPACK_PACKAGING_INSTALL_PREFIX}/share/lintian/overrides/shunt")

# Directories 0755, files 0644 or 0755, whatever the umask of the build.
execute_process(COMMAND chmod -R u+rwX,go+rX,go-w "${root}")
