document.getElementById('app').textContent = 'Recliner';
