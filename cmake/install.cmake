# `cmake --install`: libmmtune both ways (libmmtune.so with its SONAME links; libmmtune.a with
# the module archives it needs), mmtune.h, the mmtune CLI, the templates, a CMake package and
# two pkg-config files.
#   CMake:      find_package(mmtune) -> mmtune::mmtune (shared) and mmtune::mmtune_static
#   pkg-config: mmtune (shared) and mmtune-static
# Shared is the default name because it is the usual one for a system library; the static
# form is for binaries that must run where Lua and SQLite are not installed.
include(CMakePackageConfigHelpers)

set_target_properties(mmtune_shared PROPERTIES EXPORT_NAME mmtune)
set_target_properties(mmtune PROPERTIES EXPORT_NAME mmtune_static)
install(TARGETS mmt_util mmt_gen mmt_db mmt_runtime mmtune mmtune_shared EXPORT mmtuneTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS mmtune_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/mmtune.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/templates/ DESTINATION ${CMAKE_INSTALL_DATADIR}/mmtune/templates
        FILES_MATCHING PATTERN "*.lua" PATTERN "*.cu" PATTERN "*.md"
        PATTERN "lineage.txt") # snippets and the lineage of earlier versions too

# A sanitized build's libmmtune needs the sanitizers' runtimes in the program that uses it,
# ASan's first: the package links its users with the same flags (mmtune.pc and
# mmtune-static.pc too, MMT_PC_SANITIZE below).
set(MMT_PC_SANITIZE "")
if(MMT_SANITIZE)
  target_link_options(mmtune INTERFACE "$<INSTALL_INTERFACE:${MMT_SANITIZE_FLAGS}>")
  target_link_options(mmtune_shared INTERFACE "$<INSTALL_INTERFACE:${MMT_SANITIZE_FLAGS}>")
  list(JOIN MMT_SANITIZE_FLAGS " " flags)
  set(MMT_PC_SANITIZE " ${flags}")
endif()

set(MMT_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/mmtune)
install(EXPORT mmtuneTargets NAMESPACE mmtune:: DESTINATION ${MMT_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/mmtuneConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/mmtuneConfig.cmake
                              INSTALL_DESTINATION ${MMT_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/mmtuneConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/mmtuneConfig.cmake ${PROJECT_BINARY_DIR}/mmtuneConfigVersion.cmake
        DESTINATION ${MMT_CMAKE_DIR})

# pkg-config.  mmtune.pc: the shared library, which records its own dependencies (Lua, SQLite
# and NVRTC as shared libraries).  mmtune-static.pc: the archives by path (-lmmtune would
# pick the .so) and everything a static link needs (Lua, SQLite and NVRTC as the paths this
# build used; the CUDA driver is never linked).
set(MMT_PC_DEPS "${LUA_LIBRARY} ${SQLITE_LIBRARY} ${CUDA_nvrtc_LIBRARY} -ldl -lpthread -lm")
configure_file(${PROJECT_SOURCE_DIR}/cmake/mmtune.pc.in ${PROJECT_BINARY_DIR}/mmtune.pc @ONLY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/mmtune-static.pc.in ${PROJECT_BINARY_DIR}/mmtune-static.pc
               @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/mmtune.pc ${PROJECT_BINARY_DIR}/mmtune-static.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
