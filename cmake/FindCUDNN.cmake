# Finds cuDNN (it ships no CMake package). Defines CUDNN_FOUND, CUDNN_VERSION and the imported
# target CUDNN::cudnn. Linking the small libcudnn.so is enough: it loads its sub-libraries from
# its own directory at run time.
#
# Where it looks, first match wins, one folder at a time: CUDNN_ROOT (CMake or environment
# variable), CUDA_HOME, CUDA_PATH, the toolkit of the CUDA compiler, /usr/local/cuda, then the
# cuDNN of python3's nvidia-cudnn wheel (site-packages/nvidia/cudnn). A folder may hold only the
# versioned libcudnn.so.9, as the Python wheels do: it is found without an unversioned link.
set(_cudnn_hints ${CUDNN_ROOT} $ENV{CUDNN_ROOT} $ENV{CUDA_HOME} $ENV{CUDA_PATH})
if(CMAKE_CUDA_COMPILER)
  get_filename_component(_nvcc_dir "${CMAKE_CUDA_COMPILER}" DIRECTORY)
  list(APPEND _cudnn_hints "${_nvcc_dir}/..")
endif()
list(APPEND _cudnn_hints /usr/local/cuda)
if(NOT CUDNN_NO_PYTHON)
  find_program(_cudnn_python python3)
  if(_cudnn_python)
    execute_process(COMMAND ${_cudnn_python} -c "import nvidia.cudnn, os; print(os.path.dirname(nvidia.cudnn.__file__))"
                    OUTPUT_VARIABLE _cudnn_wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _cudnn_rc)
    if(_cudnn_rc EQUAL 0 AND IS_DIRECTORY "${_cudnn_wheel}")
      list(APPEND _cudnn_hints "${_cudnn_wheel}")
    endif()
  endif()
endif()
find_path(CUDNN_INCLUDE_DIR cudnn_version.h HINTS ${_cudnn_hints} PATH_SUFFIXES include)
# NAMES_PER_DIR: a folder earlier in the hints wins even if a later one has the unversioned name.
find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 NAMES_PER_DIR HINTS ${_cudnn_hints} PATH_SUFFIXES lib64 lib)
if(CUDNN_INCLUDE_DIR)
  file(STRINGS "${CUDNN_INCLUDE_DIR}/cudnn_version.h" _cudnn_defs REGEX "#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ")
  foreach(_part MAJOR MINOR PATCHLEVEL)
    string(REGEX MATCH "CUDNN_${_part} +([0-9]+)" _m "${_cudnn_defs}")
    set(CUDNN_${_part} "${CMAKE_MATCH_1}")
  endforeach()
  set(CUDNN_VERSION "${CUDNN_MAJOR}.${CUDNN_MINOR}.${CUDNN_PATCHLEVEL}")
endif()
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CUDNN REQUIRED_VARS CUDNN_LIBRARY CUDNN_INCLUDE_DIR VERSION_VAR CUDNN_VERSION)
if(CUDNN_FOUND AND NOT TARGET CUDNN::cudnn)
  add_library(CUDNN::cudnn UNKNOWN IMPORTED)
  set_target_properties(CUDNN::cudnn PROPERTIES IMPORTED_LOCATION "${CUDNN_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${CUDNN_INCLUDE_DIR}")
endif()
mark_as_advanced(CUDNN_INCLUDE_DIR CUDNN_LIBRARY)
