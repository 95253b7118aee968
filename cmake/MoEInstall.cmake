# `cmake --install`: headers, libraries, tools and the MoE package config
# (lib/cmake/moe) that find_package(MoE CONFIG) reads.
include(CMakePackageConfigHelpers)

# No releases yet: the package version says which API a consumer sees.
set(MOE_VERSION 0.1.0)
set(MOE_INSTALL_INCLUDE_DIR include)
set(MOE_INSTALL_BIN_DIR bin)
set(MOE_INSTALL_PACKAGE_DIR lib/cmake/moe)

# Public headers, the ODS they come from, and the declarations generated
# from it that they include.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/MoE
                  ${PROJECT_SOURCE_DIR}/include/MoE-c
        DESTINATION ${MOE_INSTALL_INCLUDE_DIR}
        FILES_MATCHING PATTERN "*.h" PATTERN "*.td")
install(DIRECTORY ${PROJECT_BINARY_DIR}/include/MoE
        DESTINATION ${MOE_INSTALL_INCLUDE_DIR}
        FILES_MATCHING PATTERN "*.h.inc"
        PATTERN "CMakeFiles" EXCLUDE)

# add_mlir_library puts every library in the export set MLIRTargets (the
# name is AddMLIR's); installed here as MoETargets.cmake, namespaced MoE::.
get_property(moe_exported_libraries GLOBAL PROPERTY MLIR_EXPORTS)
foreach(library IN LISTS moe_exported_libraries)
  target_include_directories(${library} INTERFACE
    $<INSTALL_INTERFACE:${MOE_INSTALL_INCLUDE_DIR}>)
endforeach()
install(EXPORT MLIRTargets
        FILE MoETargets.cmake
        NAMESPACE MoE::
        DESTINATION ${MOE_INSTALL_PACKAGE_DIR})

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/MoEConfig.cmake.in
  ${PROJECT_BINARY_DIR}/${MOE_INSTALL_PACKAGE_DIR}/MoEConfig.cmake
  INSTALL_DESTINATION ${MOE_INSTALL_PACKAGE_DIR}
  PATH_VARS MOE_INSTALL_INCLUDE_DIR MOE_INSTALL_BIN_DIR)
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/${MOE_INSTALL_PACKAGE_DIR}/MoEConfigVersion.cmake
  VERSION ${MOE_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/${MOE_INSTALL_PACKAGE_DIR}/MoEConfig.cmake
  ${PROJECT_BINARY_DIR}/${MOE_INSTALL_PACKAGE_DIR}/MoEConfigVersion.cmake
  DESTINATION ${MOE_INSTALL_PACKAGE_DIR})
