# Sourced by the device scripts (device.sh, device-tests.sh) on a GPU machine: the Vulkan loader
# carried in .gl/ (see /work/.library/device/README.md) when the machine has none, and the
# NVIDIA driver's ICD file when it is where those machines keep it.
if ! ldconfig -p 2>/dev/null | grep -q libvulkan && ls .gl/*.deb >/dev/null 2>&1; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
fi
# Vulkan on those machines (wgpu would otherwise also offer the driver's OpenGL adapter).
export WGPU_BACKEND=${WGPU_BACKEND:-vulkan}
